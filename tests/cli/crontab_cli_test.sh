#!/usr/bin/env bash
# The crontab conveniences with real processes, on the in-memory
# coordinator: a system crontab (SHELL=, PATH=, MAILTO=, @reboot, @daily,
# \% escapes) validates and runs as cron runs it; '%' feeds standard input;
# @reboot runs once at start and not at a reload; dir=, env-file= and (as
# root) user=; --watch reloads on an atomic rename and on a Kubernetes
# ConfigMap-style symlink swap, and keeps the old jobs for an invalid file.
# Usage: crontab_cli_test.sh PATH_TO_FLEETCRON
set -uo pipefail
bin=$1
source "$(dirname "$0")/../../scripts/ports.sh"
work=$(mktemp -d /tmp/fleetcron-crontab.XXXXXX)
export STATE_DIRECTORY=$work/state  # the daemons keep their runs' output under it (not /var/lib)
chmod 755 "$work"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null
  rm -rf "$work"
  release_ports
}
trap cleanup EXIT
failures=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; failures=$((failures + 1)); }
wait_for() {  # FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
count() { grep -c -- "$2" "$1" 2>/dev/null || true; }

# A file as a Debian system has it, jobs moved over unchanged.
cat >"$work/system.cron" <<'JOBS'
# /etc/crontab: system-wide crontab
SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin
MAILTO=root

@reboot     echo booted
17 *  * * * cd / && run-parts --report /etc/cron.hourly
@daily      test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )
5 0 * * *   tar czf /var/backups/etc-$(date +\%F).tgz /etc
JOBS
out=$("$bin" validate "$work/system.cron" -n 1 2>&1)
status=$?
if ((status == 0)) && [[ $out == *"system.cron: 4 job(s)"* && $out == *"system.cron:4: note: MAILTO is not supported"* &&
      $out == *"@reboot: once when the daemon starts"* && $out == *'command  tar czf /var/backups/etc-$(date +%F).tgz /etc'* ]]; then
  ok "a system crontab validates: MAILTO noted, @reboot explained, \\% unescaped"
else
  bad "system crontab: status $status: $out"
fi

# '%' as cron reads it: the command, then standard input.
cat >"$work/percent.cron" <<JOBS
* * * * * *  cat > $work/stdin.txt%first line%second 100\\% sure
JOBS
out=$("$bin" validate --seconds "$work/percent.cron" -n 1)
if [[ $out == *"command  cat > $work/stdin.txt"* && $out == *'input    "first line\nsecond 100% sure\n"'* ]]; then
  ok "validate shows the command and its standard input apart"
else
  bad "validate of %: $out"
fi

# A running daemon: @reboot, %, dir=, env-file=, user= and --watch.
mkdir -p "$work/app" "$work/config/..2026_12_03_a"
chmod 777 "$work/app"
printf 'export APP_MODE=fast\nAPP_NAME="my app"\n' >"$work/app.env"
user_line=""
if (($(id -u) == 0)); then user_line="user=nobody"; fi
cat >"$work/config/..2026_12_03_a/jobs" <<JOBS
MAILTO=ops@example.com
@reboot  echo "booted \$FLEETCRON_JOB_KEY" >> $work/booted
* * * * * *  cat >> $work/stdin.txt%hello%world
# fleetcron: key=where dir=$work/app env-file=$work/app.env $user_line
* * * * * *  echo "\$(pwd) \$APP_MODE \$APP_NAME \$(id -u) \$HOME" > $work/app/where.txt
# fleetcron: key=version
* * * * * *  echo one > $work/version
# fleetcron: key=failing on-failure='echo "\$FLEETCRON_FIRE_KEY \$FLEETCRON_OUTCOME \$FLEETCRON_EXIT_STATUS" >> $work/failures'
*/2 * * * * *  exit 4
JOBS
ln -s ..2026_12_03_a "$work/config/..data"
ln -s ..data/jobs "$work/config/jobs"
printf 'memory-token\n' >"$work/token"
port=$(pick_port)
"$bin" run --seconds --watch --shutdown-grace 1s --log-format json --http "127.0.0.1:$port" --api-token-file "$work/token" \
  "$work/config/jobs" 2>"$work/log" &
pid=$!
pids+=("$pid")
if wait_for "$work/booted" booted 10 && wait_for "$work/stdin.txt" world 10; then ok "@reboot ran at start; % fed stdin"; else bad "no @reboot or stdin run: $(tail -5 "$work/log")"; fi
if [[ $(head -2 "$work/stdin.txt") == $'hello\nworld' ]]; then ok "the input is the text after %, each further % a newline"; else bad "stdin: $(cat "$work/stdin.txt")"; fi
if grep -q '"event":"unsupported-line".*jobs:1: MAILTO is not supported' "$work/log"; then ok "MAILTO is reported at start"; else bad "no MAILTO warning"; fi
if wait_for "$work/app/where.txt" fast 10; then
  read -r where mode name1 name2 uid home <"$work/app/where.txt"
  want_uid=$(id -u)
  ((want_uid == 0)) && want_uid=$(id -u nobody)
  if [[ $where == "$work/app" && $mode == fast && "$name1 $name2" == "my app" && $uid == "$want_uid" ]]; then
    ok "dir=, env-file= and user= (uid $uid, HOME $home) reach the run"
  else
    bad "where.txt: $(cat "$work/app/where.txt")"
  fi
else
  bad "the dir/env-file/user job did not run: $(grep where "$work/log" | tail -3)"
fi

# The API on the memory coordinator: the fleet is this process.
api() { curl -s -m 5 "$@"; }
if wait_for "$work/log" '"event":"http-listening"' 10 && [[ $(api "127.0.0.1:$port/api/v1/fleet") == *'"coordinator":"memory"'* ]]; then
  ok "the API serves the fleet document on memory"
else
  bad "no fleet document: $(api "127.0.0.1:$port/api/v1/fleet" | head -c 300)"
fi
jobs_answer=$(api "127.0.0.1:$port/api/v1/jobs")
if [[ $jobs_answer == *'"job":"where"'* && $jobs_answer == *'"scope":"replica (@reboot)"'* ]]; then ok "/api/v1/jobs lists the jobs, @reboot as such"; else bad "jobs: ${jobs_answer:0:400}"; fi
status=$(api -o /dev/null -w '%{http_code}' -X POST "127.0.0.1:$port/api/v1/jobs/where/trigger")
[[ $status == 401 ]] && ok "a trigger without the token is 401" || bad "trigger without a token: $status"
status=$(api -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer memory-token' "127.0.0.1:$port/api/v1/jobs/where/trigger")
manual_run() { api "127.0.0.1:$port/api/v1/jobs/where/runs?limit=20" | grep -q '"manual":true,'; }
deadline=$((SECONDS + 10))
until manual_run || ((SECONDS > deadline)); do sleep 0.2; done
if [[ $status == 202 ]] && manual_run; then ok "a trigger through the API runs the job (the ledger shows it)"; else bad "trigger: $status, runs: $(api "127.0.0.1:$port/api/v1/jobs/where/runs?limit=3" | head -c 300)"; fi
if [[ $(api "127.0.0.1:$port/") == *'<title>fleetcron</title>'* ]]; then ok "the status page is served at /"; else bad "no status page"; fi
# DNS rebinding: on loopback, another name in Host is refused.
rebound=$(api -w ' %{http_code}' -H 'Host: evil.example:80' "127.0.0.1:$port/api/v1/fleet")
named=$(api -o /dev/null -w '%{http_code}' -H "Host: localhost:$port" "127.0.0.1:$port/api/v1/fleet")
prefixed=$(api -o /dev/null -w '%{http_code}' -H "Host: 127.0.0.1.evil.example:$port" "127.0.0.1:$port/api/v1/fleet")
other_loopback=$(api -o /dev/null -w '%{http_code}' -H "Host: 127.0.0.2:$port" "127.0.0.1:$port/api/v1/fleet")
if [[ $rebound == *'Host evil.example:80 is not served here'*' 403' && $named == 200 && $prefixed == 403 &&
      $other_loopback == 200 ]]; then
  ok "a loopback listener answers loopback names only (127.0.0.1.evil.example is not one)"
else
  bad "Host check: $rebound / $named / 127.0.0.1.evil.example: $prefixed / 127.0.0.2: $other_loopback"
fi
page_headers=$(api -D - -o /dev/null "127.0.0.1:$port/")
if [[ $page_headers == *"Content-Security-Policy: frame-ancestors 'none'"* && $page_headers == *'X-Frame-Options: DENY'* ]]; then
  ok "the page may not be framed by another site"
else
  bad "page headers: $page_headers"
fi

if wait_for "$work/failures" "failed 4" 10; then ok "on-failure runs with the outcome and exit status (memory)"; else bad "no on-failure: $(grep notify "$work/log" | tail -3)"; fi

# --watch: a ConfigMap update swaps ..data atomically.
wait_for "$work/version" one 10 || bad "version job did not run"
mkdir "$work/config/..2026_12_03_b"
sed 's/echo one/echo two/' "$work/config/..2026_12_03_a/jobs" >"$work/config/..2026_12_03_b/jobs"
ln -s ..2026_12_03_b "$work/config/..data_tmp"
mv -T "$work/config/..data_tmp" "$work/config/..data"
if wait_for "$work/log" '"event":"reloaded".*1 changed' 10 && wait_for "$work/version" two 10; then
  ok "--watch reloads on a ConfigMap symlink swap"
else
  bad "no reload after the swap: $(grep -E 'reload|watch' "$work/log")"
fi
if (($(count "$work/booted" booted) == 1)); then ok "a reload does not run @reboot again"; else bad "@reboot ran $(count "$work/booted" booted) times"; fi
# An invalid file: reported, the old jobs stay.
printf '61 * * * * * nope\n' >"$work/config/..2026_12_03_b/jobs.new"
mv "$work/config/..2026_12_03_b/jobs.new" "$work/config/..2026_12_03_b/jobs"
if wait_for "$work/log" '"event":"reload-failed".*field second: 61 above maximum 59; keeping the jobs loaded before' 10; then
  ok "--watch: an invalid file is refused whole"
else
  bad "no reload-failed: $(grep -E 'reload' "$work/log")"
fi
: >"$work/version"
if wait_for "$work/version" two 5; then ok "the old jobs run on"; else bad "jobs stopped after the invalid file"; fi
# Rapid writes are debounced into one reload.
reloads_before=$(count "$work/log" '"event":"reloaded"')
for n in 3 4 5 6; do
  sed "s/echo one/echo v$n/" "$work/config/..2026_12_03_a/jobs" >"$work/config/..2026_12_03_b/jobs.new"
  mv "$work/config/..2026_12_03_b/jobs.new" "$work/config/..2026_12_03_b/jobs"
done
if wait_for "$work/version" v6 10; then
  reloads=$(($(count "$work/log" '"event":"reloaded"') - reloads_before))
  if ((reloads == 1)); then ok "four quick writes gave one reload"; else bad "four quick writes gave $reloads reloads"; fi
else
  bad "the last write was not loaded: $(grep -E 'reload' "$work/log" | tail -3)"
fi
kill -TERM "$pid"
wait "$pid"
status=$?
if ((status == 0)); then ok "SIGTERM: exit 0"; else bad "exit status $status"; fi

# The shipped examples validate.
root=$(cd "$(dirname "$0")/../.." && pwd)
for example in "$root"/examples/*.cron; do
  if out=$("$bin" validate "$example" 2>&1) || out=$("$bin" validate --seconds "$example" 2>&1); then
    ok "$(basename "$example") validates"
  else
    bad "$(basename "$example"): $out"
  fi
done
out=$("$bin" validate "$root/examples/crontab.cron" -n 1)
if [[ $out == *'input    "Good morning.\nToday'* && $out == *"scope    replica (every replica"* && $out == *"env-file $root/examples/crontab.env"* ]]; then
  ok "examples/crontab.cron reads as documented"
else
  bad "crontab.cron: $out"
fi

# A token file that cannot serve is refused at start (exit 2), naming it.
printf '* * * * * true\n' >"$work/one.cron"
: >"$work/empty-token"
out=$("$bin" run --http 127.0.0.1:0 --api-token-file "$work/empty-token" "$work/one.cron" 2>&1)
if [[ $? == 2 && $out == *"--api-token-file $work/empty-token: empty"* ]]; then ok "an empty token file: exit 2"; else bad "empty token file: $out"; fi
out=$("$bin" run --http 127.0.0.1:0 --api-token-file /dev/zero "$work/one.cron" 2>&1)
if [[ $? == 2 && $out == *"--api-token-file /dev/zero: not a regular file"* ]]; then ok "a token 'file' that is a device: exit 2"; else bad "/dev/zero token: $out"; fi

# Refusals at load, with file:line:column.
printf '# fleetcron: user=no-such-user-anywhere\n* * * * * true\n' >"$work/user.cron"
out=$("$bin" validate "$work/user.cron" 2>&1)
if [[ $? == 2 && $out == *"user.cron:1:19: user: user \"no-such-user-anywhere\" does not exist"* ]]; then ok "an unknown user is a load error"; else bad "unknown user: $out"; fi
printf '# fleetcron: env-file=missing.env\n* * * * * true\n' >"$work/env.cron"
out=$("$bin" validate "$work/env.cron" 2>&1)
if [[ $? == 2 && $out == *"env.cron:1:23: env-file: $work/missing.env: No such file or directory"* ]]; then ok "a missing env file is a load error"; else bad "missing env file: $out"; fi

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all crontab CLI checks passed"
