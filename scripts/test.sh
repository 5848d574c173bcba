#!/usr/bin/env bash
# Every test: installs what is needed, then runs these phases and ends with
# one table of them (passed, failed or not run, and the time each took):
#  1. g++ build (-Werror): unit, scheduler and daemon tests, the
#     differential test, CLI tests, fuzz corpus replay, the fleet
#     simulation; then the fleet runs of this build's program: end-to-end
#     fleets of three daemons (the status page in headless Chromium among
#     them), chaos and store faults; a -O3 build of the shared libraries,
#     program and examples (-Werror; exported symbols checked, installed
#     package tested, Debian packages built, installed and purged); the
#     NATS leak check; benchmark smoke run;
#  2. clang build with ASan+UBSan (-Werror): the same tests and the Redis,
#     NATS and PostgreSQL integration tests, plus a short libFuzzer run of
#     every fuzz target;
#  3. g++ ThreadSanitizer build (beside the ASan tests): the scheduler
#     tests, the Redis, NATS and PostgreSQL tests, the daemon's notifier,
#     API and HTTP listener, and the simulator.
# A failing phase does not stop the others; a phase whose build failed is
# reported "not run". Exits non-zero if any phase failed or did not run.
# Integration tests share a redis-server, a nats-server and a PostgreSQL
# cluster started here on free loopback ports (stopped by PID on exit);
# fault tests start private ones. FUZZ_SECONDS (default 6) sets the fuzz
# run.
#
# Parallelism (docs/reliability.md, "A busy host"): builds and the
# integration tests use every core; the fleet runs go six at once (each is
# mostly waiting); the -O3, core-only and ASan builds run beside the g++
# tests and the fleet runs at the lowest priority, the ThreadSanitizer
# build beside the ASan tests. The timing checks do not
# assume an idle host: the fleets derive their windows from the lateness
# the daemons themselves measure and log (`scheduling-lag`), the tests
# against real servers from the lateness a probe thread measures
# (tests/support/pace_probe.h), so a loaded host makes them wait longer,
# not fail.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
fuzz_seconds=${FUZZ_SECONDS:-6}
started=$SECONDS

declare -A phase_passed=()
phase_rows=()
any_failed=0

# phase ID "TITLE" "NEEDS" → runs the function ID in a subshell with
# errexit, after the phases named in NEEDS (space-separated IDs) passed.
phase() {
  local id=$1 title=$2 needs=$3 need begin=$SECONDS status
  printf '\n=== %s (%ds)\n' "$title" $((SECONDS - started))
  for need in $needs; do
    if [[ ${phase_passed[$need]:-0} != 1 ]]; then
      echo "not run: phase $need did not pass"
      phase_rows+=("$(printf '%-12s %6s  %s' "not run" "-" "$title")")
      any_failed=1
      return
    fi
  done
  ( set -euo pipefail; "$id" )
  status=$?
  if ((status == 0)); then
    phase_passed[$id]=1
    phase_rows+=("$(printf '%-12s %5ds  %s' "passed" $((SECONDS - begin)) "$title")")
  else
    echo "phase failed (exit $status): $title"
    phase_rows+=("$(printf '%-12s %5ds  %s' "FAILED" $((SECONDS - begin)) "$title")")
    any_failed=1
  fi
}

# run_ctest DIR ARGS... runs ctest in the build directory DIR and, when
# tests fail, keeps their names for the summary (CI shows a run's last
# lines only; the names must reach them).
run_ctest() {
  local dir=$1 status=0
  shift
  (cd "$dir" && ctest --output-on-failure "$@") || status=$?
  if ((status != 0)); then
    sed "s|^[0-9]*:|$dir: |" "$dir/Testing/Temporary/LastTestsFailed.log" >>build/failed-tests.txt 2>/dev/null ||
      echo "$dir: ctest $* failed (exit $status)" >>build/failed-tests.txt
    # The fleet scripts say why in a line of their own.
    grep -h '^FAIL' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | cut -c1-200 | head -n 5 |
      sed 's/^/    /' >>build/failed-tests.txt || true
  fi
  return "$status"
}

summary() {
  printf '\n=== summary (%ds in all)\n' $((SECONDS - started))
  printf '%-12s %6s  %s\n' "result" "time" "phase"
  printf '%s\n' "${phase_rows[@]}"
  if [[ -s build/failed-tests.txt ]]; then
    echo "failed tests:"
    sed 's/^/  /' build/failed-tests.txt
  fi
  if ((any_failed)); then echo "SOME PHASES FAILED"; else echo "all tests passed"; fi
}

dependencies() { bash scripts/deps.sh; }

# The RelWithDebInfo builds here keep line tables only (-g1): sanitizer
# reports and backtraces still name file and line, and the builds take
# about a fifth less time (tests/scheduler/ledger_test.cpp: 7.1 s against
# 9.6 s with -g), which keeps the whole run within its budget.
line_tables=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
# The sanitizer builds at -O1, as the sanitizers' own documentation
# suggests: a sixth less compile time (src/core/scheduler/registry.cpp under ASan:
# 9.5 s against 11.5 s; under TSan 5.5 s against 6.5 s), every check kept.
sanitizer_line_tables=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")

gcc_build() {
  cmake -S . -B build/gcc -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo "${line_tables[@]}" \
    -DFLEETCRON_WERROR=ON >/dev/null
  cmake --build build/gcc -j"$jobs"
}

# The integration suites against real servers (labels redis, nats,
# postgres) run in the ASan and TSan passes, under both sanitizers; this
# pass runs the rest, and the fleets below run this build's program.
gcc_tests() {
  local status=0
  run_ctest build/gcc -j"$jobs" -LE 'e2e|chaos|redis|nats|postgres' || status=$?
  # The simulation's summary (docs/reliability.md quotes it); ctest keeps the
  # output of passing tests only in its log.
  grep -h '^fleetcron_sim:' build/gcc/Testing/Temporary/LastTest.log || true
  return "$status"
}

# A build in the background, at the lowest priority on every core: it takes
# only the CPU the tests beside it leave idle (integration tests and fleets
# mostly wait; fuzzing keeps one core). background NAME FUNCTION starts
# it, logging to build/NAME.log; waited NAME waits for it and leaves its
# exit status in build/NAME.status for the phase that reports it.
declare -A background_pids=()
background() {
  (set -e; "$2") >"build/$1.log" 2>&1 &
  background_pids[$1]=$!
}
waited() {
  local status=1
  if [[ -n ${background_pids[$1]:-} ]]; then
    wait "${background_pids[$1]}"
    status=$?
  fi
  echo "$status" >"build/$1.status"
}
# step NAME FUNCTION, in a background job: runs FUNCTION logging to
# build/NAME.log and leaves its exit status in build/NAME.status when it
# ends, so a phase can wait for one step of a job (awaited NAME).
step() {
  (set -e; "$2") >"build/$1.log" 2>&1
  echo $? >"build/$1.status"
}
awaited() { until [[ -f build/$1.status ]]; do sleep 1; done; }
# The phase of a background build: passed if it did, else its log's end.
background_result() {
  [[ $(cat "build/$1.status" 2>/dev/null) == 0 ]] || { tail -n 50 "build/$1.log"; echo "$1 failed"; return 1; }
}

# The -O3 (Release) shared libraries, program and examples with -Werror
# (g++ 12 warns differently at -O3), then the core library alone, without
# the backends or the program (FLEETCRON_REDIS/NATS/DAEMON=OFF), which must
# build by itself (unoptimised: what it checks is what the core needs).
# From the end of the g++ build on, beside the g++ tests and the fleet runs.
background_builds() {
  nice -n 19 cmake -S . -B build/gcc-release -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=Release \
    -DFLEETCRON_WERROR=ON -DBUILD_SHARED_LIBS=ON -DFLEETCRON_TESTS=OFF -DFLEETCRON_BENCH=OFF \
    -DFLEETCRON_EXAMPLES=ON -DFLEETCRON_INSTALL=ON -DCMAKE_INSTALL_PREFIX=/usr
  nice -n 19 cmake --build build/gcc-release -j"$jobs"
  nice -n 19 cmake -S . -B build/gcc-core -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE= \
    -DFLEETCRON_WERROR=ON -DFLEETCRON_REDIS=OFF -DFLEETCRON_NATS=OFF -DFLEETCRON_POSTGRES=OFF \
    -DFLEETCRON_DAEMON=OFF -DFLEETCRON_TESTS=OFF -DFLEETCRON_BENCH=OFF -DFLEETCRON_EXAMPLES=OFF -DFLEETCRON_INSTALL=OFF
  nice -n 19 cmake --build build/gcc-core -j"$jobs"
}

# From the end of the g++ build on, at the lowest priority: the -O3 and
# core-only builds, then the ASan build, beside the g++ tests and the
# fleet runs (which mostly wait on their daemons' jobs).
early_builds() {
  renice -n 19 -p "$BASHPID" >/dev/null
  step release-builds background_builds
  step asan-build asan_build
}

fleet_runs() {
  local status=0
  run_ctest build/gcc -j6 -L 'e2e|chaos' || status=$?
  # Each fleet run's summary line: runs, duplicates, losses and their reasons.
  grep -hE '^ok( |:)' build/gcc/Testing/Temporary/LastTest.log || true
  return "$status"
}

release_builds() {
  awaited release-builds  # the wait counts as this phase's time
  background_result release-builds
  # Hidden visibility: the program and the examples link against the public
  # API alone, the libraries export no internals, and the installed shared
  # package serves consumers (exceptions caught across the boundary).
  bash tests/install/check_exports.sh build/gcc-release
  bash tests/install/run_install_test.sh build/gcc-release . build/gcc-release/install-test
  build/gcc-release/src/daemon/fleetcron next -n 1 '@daily' >/dev/null
}

debian_packages() { bash tests/install/package_test.sh build/gcc-release . build/gcc-release/package-test; }

nats_leak_check() {
  # The tests' own output goes to a file, shown when they fail; valgrind's
  # findings go to stderr. tests/nats/valgrind.supp says what it hides, and why.
  local out=build/gcc/nats-leak-check.log status=0
  valgrind -q --leak-check=full --show-leak-kinds=definite,possible --errors-for-leak-kinds=definite,possible \
    --suppressions=tests/nats/valgrind.supp --error-exitcode=1 build/gcc/tests/fleetcron_nats_tests \
    --gtest_filter='NatsBucket.*:NatsClaimer.*:NatsElection.StopUnblocks*' >"$out" || status=$?
  if ((status != 0)); then
    grep -E -B2 -A12 '^\[  FAILED|Failure$' "$out" | head -80 || true
    tail -5 "$out"
  fi
  return "$status"
}

benchmarks() {
  build/gcc/bench/bench_cron --benchmark_min_time=0.01 --benchmark_filter='BM_Next/.*/1|BM_Parse/5/0'
  build/gcc/bench/scheduler_load 100000 2000 2000
  bash bench/redis_bench.sh build/gcc 2000 2
  bash bench/postgres_bench.sh build/gcc 2000 2 1
  bash bench/nats_bench.sh build/gcc 2000 2
  # Three daemons, 300 jobs: every burst fire started, none twice (docs/scale.md).
  EVERY=20 BURST=100 CLAIMS=2000 bash bench/fleet_bench.sh build/gcc redis 3 300 8
}

asan_build() {
  # The examples and the installed-package test ran in the g++ passes: they
  # exercise no code the tests here do not.
  cmake -S . -B build/clang-asan -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "${sanitizer_line_tables[@]}" \
    -DFLEETCRON_SANITIZE=address,undefined -DFLEETCRON_FUZZ=ON -DFLEETCRON_BENCH=OFF -DFLEETCRON_WERROR=ON \
    -DFLEETCRON_EXAMPLES=OFF -DFLEETCRON_INSTALL_TEST=OFF >/dev/null
  cmake --build build/clang-asan -j"$jobs"
}

asan_environment() {
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  # One known leak inside nats.c (tests/lsan.supp says which and why).
  export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0
}

asan_tests() {
  asan_environment
  # The end-to-end and chaos runs (labels e2e, chaos) and the million-fire
  # simulation (sim-fleet) ran in the g++ pass: minutes of wall-clock time
  # each, with nothing more to find under ASan (the simulator's own tests,
  # label sim, do run here).
  FLEETCRON_DIFFERENTIAL_CASES=1000 run_ctest build/clang-asan -j"$jobs" -LE 'e2e|chaos|sim-fleet'
}

fuzzing() {
  asan_environment
  local target name scratch status failed=0
  for target in build/clang-asan/fuzz/*_fuzz; do
    name=$(basename "$target" _fuzz)
    scratch=$(mktemp -d)
    # New inputs go to the scratch directory; the repo corpus is read-only here.
    status=0
    "$target" -max_total_time="$fuzz_seconds" -print_final_stats=1 -artifact_prefix="$scratch/" \
      "$scratch" "$root/fuzz/corpus/$name" >"$scratch/log" 2>&1 || status=$?
    grep -E '^stat::number_of_executed_units' "$scratch/log" | sed "s/^/$name: /"
    if ((status != 0)); then
      echo "fuzz target $name failed (exit $status):"
      grep -E -A20 'ERROR|runtime error|deadly signal' "$scratch/log" | head -60
      ls "$scratch"
      failed=1
      continue
    fi
    rm -rf "$scratch"
  done
  return "$failed"
}

# Beside the ASan tests and the fuzzing (one core each target).
tsan_build() {
  nice -n 19 cmake -S . -B build/gcc-tsan -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "${sanitizer_line_tables[@]}" \
    -DFLEETCRON_SANITIZE=thread -DFLEETCRON_BENCH=OFF -DFLEETCRON_INSTALL=OFF >/dev/null
  nice -n 19 cmake --build build/gcc-tsan -j"$jobs" --target fleetcron_scheduler_tests fleetcron_redis_tests \
    fleetcron_daemon_tests fleetcron_nats_tests fleetcron_postgres_tests fleetcron_sim_tests
}

tsan_tests() {
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  local failed=0
  # The scheduler, Redis, NATS and PostgreSQL tests, every core busy (most
  # of them wait on servers and timeouts, as under the g++ pass); then the
  # daemon's threads (the notifier's queue and worker, the API's caches,
  # the HTTP listener's connections, the lag probe) and three real
  # schedulers per simulated fleet, with their threads, crashes and
  # restarts.
  run_ctest build/gcc-tsan -j"$jobs" -L 'scheduler|redis|nats|postgres' || failed=1
  run_ctest build/gcc-tsan -j"$jobs" \
    -R '^(Notifier|Api|HttpServer|SchedulingLag[A-Za-z]*)\.|^Simulation\.(ClaimMode|LeaderMode|BothMode)' || failed=1
  return "$failed"
}

phase dependencies "dependencies" ""
if [[ ${phase_passed[dependencies]:-0} != 1 ]]; then summary; exit 1; fi

printf '\n=== servers for the integration tests (%ds)\n' $((SECONDS - started))
source scripts/servers.sh
if ! { start_redis && start_nats && start_postgres; }; then
  echo "a shared test server did not start: the integration tests cannot run"
  phase_rows+=("$(printf '%-12s %6s  %s' "FAILED" "-" "servers for the integration tests")")
  summary
  exit 1
fi

mkdir -p build && rm -f build/release-builds.status build/asan-build.status build/failed-tests.txt
phase gcc_build "g++ build" ""
early_builds &
phase gcc_tests "g++ tests" "gcc_build"
phase fleet_runs "g++ fleet runs: end to end, chaos, store faults (six at once)" "gcc_build"
phase release_builds "g++ -O3 (Release) and core-only builds, exports, installed package" "gcc_build"
phase debian_packages "Debian packages: built with CPack, installed with dpkg -i, used, purged" "release_builds"
phase nats_leak_check "valgrind: NATS connections, buckets, claims, an election leak nothing" "gcc_build"
phase benchmarks "benchmark smoke run (numbers: docs/time-engine.md, docs/scheduler.md)" "gcc_build"
asan_build_result() { awaited asan-build; background_result asan-build; }
phase asan_build_result "clang ASan+UBSan build (beside the g++ tests and the fleet runs)" ""
background tsan-build tsan_build
phase asan_tests "clang ASan+UBSan tests" "asan_build_result"
phase fuzzing "fuzzing ${fuzz_seconds}s per target" "asan_build_result"
waited tsan-build
tsan_build_result() { background_result tsan-build; }
phase tsan_build_result "g++ ThreadSanitizer build (beside the ASan tests and the fuzzing)" ""
phase tsan_tests "ThreadSanitizer tests" "tsan_build_result"

summary
exit "$any_failed"
