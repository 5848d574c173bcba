#!/usr/bin/env bash
# The Debian packages (cmake/FleetcronPackage.cmake): builds them with
# `cpack -G DEB` from a shared build configured with prefix /usr, checks
# what each holds, installs them with dpkg -i, runs the installed
# `fleetcron --version` and `fleetcron validate` on the shipped
# configuration and examples, builds the install consumer against the
# installed package (find_package and pkg-config), then purges them —
# also when a check fails. Needs root (dpkg -i); refuses to run where
# fleetcron packages were installed by anything but itself. Usage:
#   package_test.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR
set -euo pipefail
build=$(cd "$1" && pwd) source=$(cd "$2" && pwd) scratch=$3
[[ $(id -u) == 0 ]] || { echo "package_test.sh: dpkg -i needs root"; exit 1; }
rm -rf "$scratch" && mkdir -p "$scratch" && scratch=$(cd "$scratch" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
installed() {  # the fleetcron packages dpkg knows as installed
  dpkg-query -W -f='${Package} ${db:Status-Status}\n' fleetcron libfleetcron-dev 'libfleetcron[0-9]*' 2>/dev/null |
    awk '$2 != "not-installed" {print $1}' || true
}
# Written before this test installs anything, removed once it purged it:
# packages installed without it are an operator's, which this test must
# not purge.
marker=/var/lib/fleetcron-package-test.marker
if [[ -n $(installed) && ! -e $marker ]]; then
  echo "package_test.sh: fleetcron packages are installed on this machine and not by this test: $(installed | xargs)"
  echo "package_test.sh: refusing to purge them; remove them first (dpkg --purge) to run this test"
  exit 1
fi
cleanup() {
  local left
  left=$(installed)
  [[ -z $left ]] || dpkg --purge $left >/dev/null 2>&1 || true  # at once: the daemon depends on the libraries
  [[ -n $(installed) ]] || rm -f "$marker"
}
trap cleanup EXIT
cleanup  # a previous run's leftovers

# A plain install elsewhere: its unit names the program where that install
# put it (the package's names /usr/bin, whatever the build's prefix).
cmake --install "$build" --component daemon --prefix "$scratch/elsewhere" >/dev/null
grep -q "^ExecStart=$scratch/elsewhere/bin/fleetcron run " "$scratch/elsewhere/lib/systemd/system/fleetcron.service" ||
  fail "an install under $scratch/elsewhere: $(grep ExecStart "$scratch/elsewhere/lib/systemd/system/fleetcron.service")"
(cd "$build" && cpack -G DEB -B "$scratch/debs" >"$scratch/cpack.log" 2>&1) || { tail -30 "$scratch/cpack.log"; fail "cpack"; }
mapfile -t debs < <(ls "$scratch"/debs/*.deb)
((${#debs[@]} == 3)) || fail "expected 3 packages, got: ${debs[*]}"
for deb in "${debs[@]}"; do
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version); Depends: $(dpkg-deb -f "$deb" Depends)"
done
deb_of() { ls "$scratch"/debs/"$1"_*.deb; }
holds() {  # package, path (a regex over `dpkg-deb -c`)
  dpkg-deb -c "$(deb_of "$1")" | awk '{print $6}' | grep -qE "^\./$2\$" || fail "$1 lacks $2"
}
lacks() { ! dpkg-deb -c "$(deb_of "$1")" | awk '{print $6}' | grep -qE "^\./$2\$" || fail "$1 holds $2"; }
libs=$(dpkg-deb -f "$(ls "$scratch"/debs/libfleetcron[0-9]*.deb)" Package)
holds fleetcron usr/bin/fleetcron
holds fleetcron usr/lib/systemd/system/fleetcron.service
holds fleetcron etc/fleetcron/fleetcron.toml
holds fleetcron etc/fleetcron/jobs.cron
holds fleetcron usr/share/doc/fleetcron/examples/jobs.cron
holds fleetcron usr/share/man/man1/fleetcron.1
holds fleetcron usr/share/man/man5/fleetcron.5
holds fleetcron usr/share/bash-completion/completions/fleetcron
dpkg-deb -I "$(deb_of fleetcron)" conffiles | grep -qx /etc/fleetcron/fleetcron.toml || fail "fleetcron.toml is no conffile"
dpkg-deb -f "$(deb_of fleetcron)" Depends | grep -q "$libs (= " || fail "fleetcron does not depend on $libs"
dpkg-deb -f "$(deb_of "$libs")" Depends | grep -q "libhiredis0.14" || fail "$libs's shlibdeps lack hiredis"
holds "$libs" "usr/lib/.*/libfleetcron-redis\.so\.[0-9.]*"
lacks "$libs" "usr/lib/.*/libfleetcron-core\.so"
holds libfleetcron-dev "usr/lib/.*/libfleetcron-core\.so"
holds libfleetcron-dev usr/include/fleetcron/scheduler.h
holds libfleetcron-dev usr/include/fleetcron/redis/client.h
holds libfleetcron-dev "usr/lib/.*/cmake/fleetcron/fleetcronConfig\.cmake"
holds libfleetcron-dev "usr/lib/.*/pkgconfig/fleetcron-nats\.pc"

dpkg-deb -I "$(deb_of fleetcron)" prerm | grep -q "systemctl stop fleetcron.service" || fail "fleetcron's prerm stops no service"
dpkg-deb -I "$(deb_of "$libs")" shlibs | grep -q "^libfleetcron-core " || fail "$libs has no shlibs entry for libfleetcron-core"

touch "$marker"
dpkg -i "${debs[@]}" >"$scratch/dpkg.log" 2>&1 || { cat "$scratch/dpkg.log"; fail "dpkg -i"; }
[[ $(command -v fleetcron) == /usr/bin/fleetcron ]] || fail "fleetcron is not /usr/bin/fleetcron: $(command -v fleetcron)"
version=$(/usr/bin/fleetcron --version)
echo "$version" | sed 's/^/installed: /'
[[ $version == "fleetcron $(dpkg-query -W -f='${Version}' fleetcron)"* && $version == *"redis (hiredis"* ]] ||
  fail "--version: $version"
/usr/bin/fleetcron validate --config /etc/fleetcron/fleetcron.toml >"$scratch/validate.out" || fail "validate the shipped config"
/usr/bin/fleetcron validate /usr/share/doc/fleetcron/examples/jobs.cron >>"$scratch/validate.out" ||
  fail "validate the shipped example"
grep -q heartbeat "$scratch/validate.out" && grep -q nightly-backup "$scratch/validate.out" ||
  fail "validate printed: $(cat "$scratch/validate.out")"
getent passwd fleetcron >/dev/null || fail "postinst made no fleetcron user"
grep -q "^ExecStart=/usr/bin/fleetcron run --config /etc/fleetcron/fleetcron.toml" /usr/lib/systemd/system/fleetcron.service ||
  fail "the unit's ExecStart: $(grep ExecStart /usr/lib/systemd/system/fleetcron.service)"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /usr/lib/systemd/system/fleetcron.service 2>&1 | grep -v "^$" | sed 's/^/systemd-analyze: /' || true
fi

# The install consumer against the installed package: CMake and pkg-config.
cmake -S "$source/tests/install/consumer" -B "$scratch/consumer" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
out=$("$scratch/consumer/consumer")
[[ $out == "2026-03-08T03:00:00-04:00 "* ]] || fail "find_package consumer: $out"
out=$("$scratch/consumer/redis_consumer")
[[ $out == "redis://cron:***@127.0.0.1:6380/2 cron:claim:" ]] || fail "find_package redis consumer: $out"
c++ "$source/tests/install/consumer/nats_main.cpp" -o "$scratch/pc-nats" $(pkg-config --cflags --libs fleetcron-nats)
[[ $("$scratch/pc-nats") == "job=402026-01-02T15=3A04=3A05Z leader" ]] || fail "pkg-config nats consumer"

cleanup
[[ ! -e /usr/bin/fleetcron && ! -e /etc/fleetcron/fleetcron.toml ]] || fail "purging left files behind"
! getent passwd fleetcron >/dev/null || fail "purging left the fleetcron user"
echo "package test passed: ${#debs[@]} packages built, installed, used and purged"
