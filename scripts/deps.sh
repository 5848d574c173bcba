#!/usr/bin/env bash
# Installs the Debian 12 packages fleetcron builds, tests and runs with:
#   deps.sh build   what the daemon and the libraries build and run with
#                   (scripts/run.sh, the main job)
#   deps.sh [test]  that and every tool the tests use (scripts/test.sh)
# Idempotent: installs only what is missing, and refreshes the package
# lists only when an install fails without it. Needs root for apt-get.
set -euo pipefail

build_packages=(
  cmake make g++ pkg-config                             # toolchain
  tzdata libhowardhinnant-date-dev                      # time zones (date, USE_OS_TZDB=1)
  libfmt-dev libcli11-dev                               # formatting, command line
  libhiredis-dev libssl-dev                             # fleetcron::redis, over TLS too
  libnats-dev libpq-dev                                 # fleetcron::nats, fleetcron::postgres
  libtomlplusplus-dev libcpp-httplib-dev                # the daemon: TOML config, HTTP (with OpenSSL: https:// webhooks)
  nlohmann-json3-dev prometheus-cpp-dev                 # the daemon: JSON documents, /metrics (prometheus-cpp core)
)
test_packages=(
  clang libclang-rt-14-dev                              # libFuzzer and the sanitizers
  dpkg-dev adduser                                      # the Debian packages: dpkg-shlibdeps; the package's postinst
  redis-server redis-tools openssl                      # the Redis integration tests; the tests' certificates
  nats-server valgrind                                  # the NATS integration tests, the leak check
  postgresql postgresql-client                          # initdb, pg_ctl, psql, pgbench for the PostgreSQL tests
  faketime curl iproute2 nftables jq                    # e2e: a skewed clock, status --json, partitions; CLI: /metrics, ss
  groff-base                                            # CLI: fleetcron(1) renders without a warning
  libgtest-dev libgmock-dev libbenchmark-dev            # tests, benchmarks
  chromium chromium-driver python3                      # the status page's test in a real browser (WebDriver)
)
case ${1:-test} in
  build) packages=("${build_packages[@]}") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "deps.sh: unknown set \"$1\" (build or test)" >&2; exit 2 ;;
esac

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) != 0 ]]; then
  echo "deps.sh: missing packages: ${missing[*]}; run as root (apt-get install needs it)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt_options=(-y -q -o DPkg::Lock::Timeout=300)
echo "deps.sh: installing ${missing[*]}"
if ! apt-get install "${apt_options[@]}" "${missing[@]}"; then
  apt-get update -q -o DPkg::Lock::Timeout=300
  apt-get install "${apt_options[@]}" "${missing[@]}"
fi
