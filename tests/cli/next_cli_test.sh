#!/usr/bin/env bash
# Runs the real `fleetcron next` and checks its output and exit codes.
# Usage: next_cli_test.sh PATH_TO_FLEETCRON
set -uo pipefail
bin=$1
failures=0

check() {  # check NAME EXPECTED_STATUS EXPECTED_STDOUT -- ARGS...
  local name=$1 want_status=$2 want_out=$3
  shift 4
  local out status
  out=$("$bin" "$@" 2>/tmp/fleetcron-cli-err.$$)
  status=$?
  if [[ $status != "$want_status" || $out != "$want_out" ]]; then
    echo "FAIL $name: status $status (want $want_status)"
    echo "  stdout: $out"
    echo "  want:   $want_out"
    echo "  stderr: $(cat /tmp/fleetcron-cli-err.$$)"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

check_stderr() {  # check_stderr NAME EXPECTED_STATUS STDERR_SUBSTRING -- ARGS...
  local name=$1 want_status=$2 want_err=$3
  shift 4
  local err status
  err=$("$bin" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status != "$want_status" || $err != *"$want_err"* ]]; then
    echo "FAIL $name: status $status (want $want_status), stderr: $err (want: $want_err)"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

check gap-shift 0 $'2026-03-08T03:00:00-04:00\n2026-03-09T02:30:00-04:00' -- \
  next --tz America/New_York --from 2026-03-07T12:00:00Z -n 2 '30 2 * * *'
check gap-skip 0 $'2026-03-09T02:30:00-04:00' -- \
  next --tz America/New_York --from 2026-03-07T12:00:00Z -n 1 --dst-gap skip '30 2 * * *'
check overlap-both 0 $'2026-11-01T01:30:00-04:00\n2026-11-01T01:30:00-05:00' -- \
  next --tz America/New_York --from 2026-10-31T12:00:00Z -n 2 --dst-overlap both '30 1 * * *'
check tz-prefix-wins 0 $'2026-06-16T09:00:00+02:00' -- \
  next --tz America/New_York --from 2026-06-15T12:00:00Z -n 1 'TZ=Europe/Berlin 0 9 * * *'
check utc-default 0 $'2026-06-15T12:35:00Z\n2026-06-15T12:40:00Z\n2026-06-15T12:45:00Z' -- \
  next --from 2026-06-15T12:34:56Z -n 3 '*/5 * * * *'
check seconds 0 $'2026-06-15T12:34:58Z' -- next --seconds --from 2026-06-15T12:34:56Z -n 1 '*/2 * * * * *'
# The fifth Monday of February exists only when Feb 1 of a leap year is a
# Monday: 2044, then 2072, beyond the 5-year horizon.
# The last fifth Monday of February before 2200, the end of the supported range.
check none-after-found 0 $'2196-02-29T00:00:00Z\nnone' -- \
  next --from 2170-01-01T00:00:00Z -n 2 '0 0 ? 2 1#5'
check never 0 'none' -- next --from 2026-01-01T00:00:00Z '0 0 30 2 *'
check_stderr bad-spec 2 'parse "61 * * * *": field minute at offset 0: 61 above maximum 59' -- next '61 * * * *'
check_stderr bad-zone 2 'option --tz: unknown time zone "Mars/Olympus"' -- next --tz Mars/Olympus '* * * * *'
check_stderr bad-from 2 'option --from:' -- next --from yesterday '* * * * *'
check_stderr bad-gap 2 'option --dst-gap: "later" is not shift or skip' -- next --dst-gap later '* * * * *'
check_stderr bad-count 2 'option -n: 0 is not between 1 and 100000' -- next -n 0 '* * * * *'
check_stderr missing-spec 2 'spec is required' -- next
check_stderr unknown-option 2 'not expected: --bogus' -- next --bogus '* * * * *'

# default-count checks the count of lines, not their text.
lines=$("$bin" next --from 2026-06-15T12:34:56Z '@hourly' | wc -l)
if [[ $lines != 5 ]]; then echo "FAIL default count: $lines lines"; failures=$((failures + 1)); fi

rm -f /tmp/fleetcron-cli-err.$$
if ((failures > 0)); then echo "$failures failure(s)"; exit 1; fi
echo "all cli checks passed"
