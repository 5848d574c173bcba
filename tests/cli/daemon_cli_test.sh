#!/usr/bin/env bash
# The daemon's command line with real processes, on the in-memory
# coordinator: validate, config and flag errors with file:line, a run that
# refuses an invalid file, SIGHUP reload (and a bad reload keeping the old
# jobs), overlap=skip, JSON logs, /healthz and /readyz, SIGTERM exit 0.
# Usage: daemon_cli_test.sh PATH_TO_FLEETCRON
set -uo pipefail
bin=$1
source "$(dirname "$0")/../../scripts/ports.sh"
work=$(mktemp -d /tmp/fleetcron-cli.XXXXXX)
export STATE_DIRECTORY=$work/state  # the daemons' default output dir: $STATE_DIRECTORY/runs
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

expect_error() {  # NAME STATUS SUBSTRING -- ARGS...
  local name=$1 want_status=$2 want=$3
  shift 4
  local err status
  err=$("$bin" "$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status == "$want_status" && $err == *"$want"* ]]; then ok "$name"; else bad "$name: status $status, stderr: $err (want $want)"; fi
}

# Polls a file until it contains a pattern (bounded): the daemons' logs are
# the only signal a test script has.
wait_for() {  # FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

version=$("$bin" --version)
if [[ $version == "fleetcron "[0-9]*.[0-9]*.[0-9]*$'\nbackends:'* && $version == *"memory (one process)"* &&
      $version == *"redis (hiredis "*"TLS with OpenSSL "* && $version == *"nats (nats.c "* &&
      $version == *"postgres (libpq "* ]]; then
  ok "--version names the version and every backend"
else
  bad "--version: $version"
fi

printf '0 * * * * true\n61 * * * * echo bad\n' >"$work/bad.cron"
expect_error "validate names file:line:column" 2 "$work/bad.cron:2:1: field minute: 61 above maximum 59" -- validate "$work/bad.cron"
expect_error "run refuses an invalid file" 2 "$work/bad.cron:2:1: field minute" -- run "$work/bad.cron"
expect_error "missing file" 2 "$work/none.cron: cannot read: No such file or directory" -- validate "$work/none.cron"
printf 'jobs = "x"\ncolour = "red"\n' >"$work/bad.toml"
expect_error "config: unknown key with file:line" 2 "$work/bad.toml:2: unknown key colour" -- run --config "$work/bad.toml"
printf '[claim]\nttl = "soon"\n' >"$work/bad2.toml"
expect_error "config: bad duration with file:line" 2 "$work/bad2.toml:2: claim.ttl \"soon\": duration" -- run --config "$work/bad2.toml" "$work/bad.cron"
printf 'jobs = [\n' >"$work/broken.toml"
expect_error "config: TOML syntax error with line" 2 "$work/broken.toml:" -- run --config "$work/broken.toml"
expect_error "flag: bad coordination" 2 "option --coordination \"sometimes\": expected claim, leader or both" -- run --coordination sometimes "$work/bad.cron"
expect_error "flag: bad duration" 2 "option --claim-ttl \"soon\"" -- run --claim-ttl soon "$work/bad.cron"
expect_error "flag: bad coordinator" 2 "coordinator \"ftp://x\": expected memory" -- run --coordinator ftp://x "$work/bad.cron"
# Every command that reads the store refuses it alike, a password file
# given or not (a typo'd scheme must not reach a backend's parser).
printf 'pw\n' >"$work/pw"
for command in status history "pause job" "resume job" "trigger job" "logs job" init migrate; do
  # shellcheck disable=SC2086  # the command's words
  expect_error "$command: bad coordinator" 2 "coordinator \"redis:/h\": expected memory" -- \
    $command --coordinator "redis:/h" --coordinator-password-file "$work/pw"
done
expect_error "flag: leader TTL below the floor" 2 "leader TTL 1ms is below the minimum of 1s" -- run --leader-ttl 1ms --coordination leader "$work/bad.cron"
expect_error "history: the memory coordinator has no ledger to ask" 2 "keeps no state outside its process" -- history job
expect_error "history: every job's, from an unreachable store" 1 "connect failed" -- history --coordinator redis://127.0.0.1:1
expect_error "status: an unreachable store fails, naming it" 1 "status: redis://127.0.0.1:1/0: connect failed" -- \
  status --coordinator redis://127.0.0.1:1 --json
expect_error "flag: a history age above 400 days" 2 'option --history-age "500d": is above the maximum of 400 days' -- \
  run --history-age 500d "$work/bad.cron"
printf '[fleet]\nhistory = -1\n' >"$work/bad-history.toml"
expect_error "config: a negative history with file:line" 2 "$work/bad-history.toml:2:" -- run --config "$work/bad-history.toml" "$work/bad.cron"
expect_error "history: an unreachable store is exit 1 with the error" 1 "history: " -- history --coordinator redis://127.0.0.1:1 job
# A store that never answers stops the daemon after --store-wait, exit 1.
printf '0 0 1 1 * true\n' >"$work/quiet.cron"
started_at=$SECONDS
out=$(timeout 60 "$bin" run --coordinator redis://127.0.0.1:1 --store-wait 2s "$work/quiet.cron" 2>&1)
status=$?
if [[ $status == 1 && $out == *"store-wait"*"has not answered in the 2s since the start (--store-wait)"* ]] &&
   ((SECONDS - started_at < 30)); then
  ok "run: a store that never answers ends the daemon after --store-wait, exit 1"
else
  bad "store-wait: status $status after $((SECONDS - started_at)) s: $(tail -3 <<<"$out")"
fi
expect_error "flag: a port that is not a number" 2 'option --metrics "9464abc": expected [host]:port' -- run --metrics 9464abc "$work/bad.cron"
# The man pages render without a warning and name what they document:
# fleetcron(1) every command and every option of run that --help lists,
# fleetcron(5) every directive option the parser knows (written NAME=).
check_man_page() {  # NAME PAGE SUFFIX WORDS...
  local name=$1 page=$2 suffix=$3 warnings word missing=()
  shift 3
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  for word in "$@"; do
    grep -qF -- "${word//-/\\-}$suffix" "$page" || missing+=("$word")
  done
  if [[ -z $warnings && ${#missing[@]} == 0 ]]; then
    ok "$name renders cleanly and names all $# it documents"
  else
    bad "$name: warnings: $warnings; missing: ${missing[*]}"
  fi
}
docs="$(dirname "$0")/../../docs"
check_man_page "fleetcron(1)" "$docs/fleetcron.1" "" \
  $("$bin" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}') \
  $("$bin" run --help | grep -oE '^ +--[a-z-]+' | tr -d ' ')
check_man_page "fleetcron(5)" "$docs/fleetcron.5" "=" \
  $(grep -oE '^ +\{"[a-z-]+",( \[\]|$)' "$(dirname "$0")/../../src/daemon/config/job_directives.cpp" | grep -oE '[a-z-]+')
# The settings tables of docs/daemon.md and fleetcron(1) are the program's
# own (`fleetcron settings`; scripts/settings_docs.sh rewrites them).
settings_section() {  # FILE BEGIN END
  begin=$2 end=$3 awk 'index($0, ENVIRON["end"]) == 1 {on = 0} on {print} index($0, ENVIRON["begin"]) == 1 {on = 1}' "$1"
}
if diff <("$bin" settings) <(settings_section "$docs/daemon.md" '<!-- settings:' '<!-- settings end') >/dev/null &&
   diff <("$bin" settings --format man) <(settings_section "$docs/fleetcron.1" '.\" settings:' '.\" settings end') >/dev/null &&
   [[ $("$bin" settings | grep -c '^| `--') -ge 30 ]]; then
  ok "docs/daemon.md and fleetcron(1) hold the settings table the program declares"
else
  bad "the docs' settings tables differ from \`fleetcron settings\`: run bash scripts/settings_docs.sh"
fi
# Bash completion: commands, then a command's options from its --help.
completions() {  # words...: what completing the last one offers
  (source "$(dirname "$0")/../../packaging/fleetcron.bash-completion"
   COMP_WORDS=("$bin" "$@"); COMP_CWORD=$#; _fleetcron; echo "${COMPREPLY[*]}")
}
if [[ $(completions ru) == run && $(completions run --store) == --store-wait &&
      $(completions trigger --fo) == --force && $(completions va) == validate ]]; then
  ok "bash completion: commands and each command's options"
else
  bad "bash completion: '$(completions ru)' '$(completions run --store)' '$(completions trigger --fo)'"
fi
# validate applies the coordination's rules, without connecting: Redis's
# dedup window is claim_ttl/2, so this jitter would make every fire stale.
printf '# fleetcron: key=j jitter=6s\n* * * * * true\n' >"$work/jitter.cron"
expect_error "validate checks jitter against the coordinator's dedup window" 2 \
  "$work/jitter.cron:1:20: jitter 6s is not below the claimer's dedup window 5s" -- \
  validate --coordinator redis://127.0.0.1:1 --claim-ttl 10s "$work/jitter.cron"
if "$bin" validate --claim-ttl 10s "$work/jitter.cron" >/dev/null; then ok "the same jitter fits memory's window"; else bad "validate refused jitter 6s on memory (window 10s)"; fi
long_key=$(printf '%0.s.' {1..700})
printf '# fleetcron: key=a%s\n* * * * * true\n' "$long_key" >"$work/longkey.cron"
expect_error "validate refuses a key too long for NATS keys" 2 "above the 2048-byte limit" -- \
  validate --coordinator nats://127.0.0.1:1 "$work/longkey.cron"
# @every counts from the epoch, as on every replica.
out=$("$bin" next --from 2026-01-01T00:20:00Z -n 2 '@every 1h')
if [[ $out == $'2026-01-01T01:00:00Z\n2026-01-01T02:00:00Z' ]]; then ok "next: @every from the epoch"; else bad "next @every 1h: $out"; fi
printf '@every 7s true\n' >"$work/every.cron"
epoch_ok=1
fires=$("$bin" validate --seconds "$work/every.cron" -n 3 | grep -oE '[0-9]{4}-[0-9-]+T[0-9:]+Z')
for f in $fires; do (( $(date -u -d "$f" +%s) % 7 == 0 )) || epoch_ok=0; done
if [[ -n $fires ]] && ((epoch_ok)); then ok "validate: @every 7s fires on multiples of 7 s since the epoch"; else bad "validate @every: $fires"; fi

# A running daemon: reload, overlap, logs, health.
cat >"$work/jobs.cron" <<JOBS
# fleetcron: key=tick
* * * * * *  echo "tick \$FLEETCRON_FIRE_KEY" >> $work/ticks
# fleetcron: key=slow overlap=skip timeout=10s
* * * * * *  sleep 2.5
JOBS
out=$("$bin" validate --seconds "$work/jobs.cron" -n 1)
if [[ $out == *"key tick"* && $out == *"key slow"* && $out == *"overlap=skip"* ]]; then ok "validate prints keys and options"; else bad "validate output: $out"; fi

port=$(pick_port)
"$bin" run --seconds --claim-ttl 10m --shutdown-grace 1s --log-format json --metrics "127.0.0.1:$port" "$work/jobs.cron" 2>"$work/log" &
pid=$!
pids+=("$pid")
if wait_for "$work/ticks" tick 10; then ok "runs happen"; else bad "no tick in 10 s"; fi
if wait_for "$work/log" '"event":"fire-skipped","job":"slow"' 10; then ok "overlap=skip skips a fire that finds the previous run going"; else bad "no overlap skip logged"; fi
if grep -q '"event":"memory-coordinator".*coordinates this process only' "$work/log"; then ok "the memory coordinator says it is one process only"; else bad "no memory-coordinator warning"; fi
if grep -q '"event":"run-finished","job":"tick","fire":"tick@' "$work/log"; then ok "JSON lines carry event, job and fire keys"; else bad "JSON log lines: $(head -3 "$work/log")"; fi
if [[ $(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/healthz") == 200 && \
      $(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/readyz") == 200 ]]; then ok "/healthz and /readyz"; else bad "health endpoints"; fi

# Reload: change tick's command, remove slow, add new.
cat >"$work/jobs.cron" <<JOBS
# fleetcron: key=tick
* * * * * *  echo "tock \$FLEETCRON_FIRE_KEY" >> $work/ticks
# fleetcron: key=new
* * * * * *  echo new >> $work/new
JOBS
kill -HUP "$pid"
if wait_for "$work/log" '"event":"reloaded".*2 jobs: 1 added, 1 removed, 1 changed' 5; then ok "SIGHUP reload applies added, removed, changed"; else bad "reload: $(grep reload "$work/log")"; fi
if wait_for "$work/new" new 5 && wait_for "$work/ticks" tock 5; then ok "reloaded jobs run"; else bad "reloaded jobs did not run"; fi
printf '61 * * * * * nope\n' >"$work/jobs.cron"
kill -HUP "$pid"
if wait_for "$work/log" '"event":"reload-failed".*jobs.cron:1:1: field second: 61 above maximum 59; keeping the jobs loaded before' 5; then
  ok "an invalid reload is reported and the old jobs stay"
else
  bad "bad reload: $(grep reload "$work/log")"
fi
# A file that validates but whose jitter the claimer refuses (the review's
# SIGHUP abort): refused whole, before anything is removed.
cat >"$work/jobs.cron" <<JOBS
# fleetcron: key=tick
* * * * * *  echo "tock \$FLEETCRON_FIRE_KEY" >> $work/ticks
# fleetcron: key=jittery jitter=10m
* * * * * *  true
JOBS
kill -HUP "$pid"
if wait_for "$work/log" '"event":"reload-failed".*jobs.cron:3:26: jitter 10m0s is not below the claimer' 5 && kill -0 "$pid"; then
  ok "a reload the scheduler would refuse is reported, and the daemon runs on"
else
  bad "jitter reload: $(grep reload "$work/log")"
fi
before=$(grep -c new "$work/new")
if wait_for "$work/new" "" 1 && sleep 2 && (($(grep -c new "$work/new") > before)); then ok "old jobs keep running after a bad reload"; else bad "jobs stopped after a bad reload"; fi

# A job whose fires sleep a jitter of up to 5 min: the stop cancels them
# before they claim (all would have to draw under 2 s to escape), and each
# cancellation is logged (never dropped silently).
printf '# fleetcron: key=new\n* * * * * *  echo new >> %s\n# fleetcron: key=jit jitter=5m\n* * * * * *  true\n' "$work/new" >"$work/jobs.cron"
kill -HUP "$pid"
wait_for "$work/log" '"event":"reloaded".*2 jobs: 1 added, 1 removed, 0 changed' 5 || bad "reload with jit: $(grep reload "$work/log" | tail -1)"
sleep 2  # let a few jittered fires start sleeping (pacing, not synchronising: the check below waits for the log)
kill -TERM "$pid"
wait "$pid"
status=$?
if grep -q '"event":"fire-cancelled","job":"jit","fire":"jit@.*stopped during jitter (stopped-before-start)' "$work/log"; then
  ok "fires cancelled by the stop are logged with their reason"
else
  bad "no fire-cancelled line for jit: $(grep cancelled "$work/log" | tail -3)"
fi
if ((status == 0)) && grep -q '"event":"stopped"' "$work/log"; then ok "SIGTERM drains and exits 0"; else bad "SIGTERM: status $status"; fi
# Each thing is logged once, from the scheduler's events: no second line
# from the scheduler's own logger for what an event already reported.
if ! grep -q '"event":"scheduler".*skipped' "$work/log" && grep -q '"event":"fire-skipped"' "$work/log"; then
  ok "a skip is logged once (fire-skipped), not again by the scheduler"
else
  bad "skips logged twice: $(grep -c '"event":"scheduler"' "$work/log") scheduler lines"
fi

# timeout= bounds each attempt (the scheduler's attempt timeout): the
# attempt is stopped, retried, and the run ends timed-out.
cat >"$work/hang.cron" <<JOBS
# fleetcron: key=hang timeout=1s retries=1
* * * * * *  echo started >> $work/hang-starts; sleep 30
JOBS
hang_port=$(pick_port)
"$bin" run --seconds --shutdown-grace 1s --kill-grace 1s --log-format json --metrics "127.0.0.1:$hang_port" \
  "$work/hang.cron" 2>"$work/hang.log" &
hang_pid=$!
pids+=("$hang_pid")
if wait_for "$work/hang.log" '"event":"run-finished","job":"hang".*"message":"timed-out: attempt timed out after 1s: signal 15' 20; then
  ok "timeout= stops the attempt, and the run ends timed-out"
else
  bad "timeout=: $(grep hang "$work/hang.log" | tail -3)"
fi
if grep -q '"event":"attempt-failed","job":"hang".*attempt 1 timed-out: attempt timed out after 1s.*retrying in' "$work/hang.log" &&
   (( $(grep -c '"event":"run-started","job":"hang"' "$work/hang.log") >= 2 )); then
  ok "a timed-out attempt is retried (retries=1)"
else
  bad "no retry after the attempt timeout: $(grep -c run-started "$work/hang.log") run-started lines"
fi
hang_metrics=$(curl -s "127.0.0.1:$hang_port/metrics")
if [[ $hang_metrics == *'fleetcron_runs_total{outcome="timed-out"} '[1-9]* && $hang_metrics == *$'\nfleetcron_retries_total '[1-9]* ]]; then
  ok "timed-out runs and retries are counted"
else
  bad "metrics: $(echo "$hang_metrics" | grep -E 'runs_total|retries_total')"
fi
kill -TERM "$hang_pid" 2>/dev/null; wait "$hang_pid" 2>/dev/null

# stderr into a FIFO nobody reads (a wedged log driver), a job printing
# 200 KB a second: the log drops and counts lines, scheduling goes on.
mkfifo "$work/stuck"
exec 3<>"$work/stuck"   # held open, never read: writes block once the pipe is full
cat >"$work/loud.cron" <<JOBS
# fleetcron: key=loud
* * * * * *  env > $work/loud.env; head -c 200000 /dev/zero | tr '\\0' x; echo; seq 1 20000; echo run >> $work/loud
JOBS
port=$(pick_port)
FLEETCRON_REDIS_PASSWORD=hunter2 FLEETCRON_NATS_PASSWORD=hunter3 FLEETCRON_POSTGRES_PASSWORD=hunter4 \
  "$bin" run --seconds --metrics ":$port" "$work/loud.cron" 2>"$work/stuck" &
loud_pid=$!
pids+=("$loud_pid")
if wait_for "$work/loud" run 10; then
  sleep 4  # pacing: the pipe has long been full by now
  before=$(grep -c run "$work/loud")
  if wait_for "$work/loud" "" 1 && sleep 3 && (($(grep -c run "$work/loud") >= before + 2)); then
    ok "a blocked stderr does not stop scheduling"
  else
    bad "runs stopped while stderr was blocked ($before, then $(grep -c run "$work/loud"))"
  fi
  if grep -q FLEETCRON_JOB_KEY=loud "$work/loud.env" && ! grep -qE 'hunter[234]' "$work/loud.env"; then
    ok "no coordinator password variable (Redis, NATS, PostgreSQL) reaches the jobs"
  else
    bad "job environment: $(grep -cE 'hunter[234]' "$work/loud.env") password line(s)"
  fi
  if ss -ltnH "sport = :$port" | grep -q "127.0.0.1:$port"; then ok "--metrics :PORT listens on loopback only"; else bad "listen: $(ss -ltnH "sport = :$port")"; fi
  dropped=$(curl -s "127.0.0.1:$port/metrics" | awk '/^fleetcron_log_lines_dropped_total/ {print $2}')
  if [[ -n $dropped ]] && ((dropped > 0)); then ok "dropped log lines are counted ($dropped)"; else bad "fleetcron_log_lines_dropped_total: '$dropped'"; fi
else
  bad "the loud job never ran"
fi
kill -KILL "$loud_pid" 2>/dev/null; wait "$loud_pid" 2>/dev/null
exec 3>&-

# The coordinator password from a file or the environment, never argv.
redis_port=$(pick_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --requirepass s3cret --dir "$work" --save '' --appendonly no >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
for _ in $(seq 50); do redis-cli -p "$redis_port" -a s3cret --no-auth-warning ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
printf 's3cret\n' >"$work/password"
if "$bin" status --coordinator "redis://127.0.0.1:$redis_port" --coordinator-password-file "$work/password" >/dev/null; then
  ok "--coordinator-password-file authenticates"
else
  bad "status with a password file failed"
fi
if FLEETCRON_REDIS_PASSWORD=s3cret "$bin" status --coordinator "redis://127.0.0.1:$redis_port" >/dev/null; then
  ok "FLEETCRON_REDIS_PASSWORD authenticates"
else
  bad "status with FLEETCRON_REDIS_PASSWORD failed"
fi
expect_error "no password: the server's refusal is reported" 1 "NOAUTH" -- status --coordinator "redis://127.0.0.1:$redis_port"
expect_error "a password twice is refused" 2 "has a password and coordinator password file" -- \
  status --coordinator "redis://:x@127.0.0.1:$redis_port" --coordinator-password-file "$work/password"
expect_error "an unreadable password file is named" 2 "coordinator password file $work/none: cannot read" -- \
  status --coordinator "redis://127.0.0.1:$redis_port" --coordinator-password-file "$work/none"
kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null

# A Redis that may evict keys is found out (issue 13): a warning and a
# metric, or a refusal with --require-noeviction; CONFIG disabled is a
# warning, not a crash.
start_test_redis() {  # EXTRA ARGS... → sets test_redis_port, test_redis_pid
  test_redis_port=$(pick_port)
  redis-server --port "$test_redis_port" --bind 127.0.0.1 --dir "$work" --dbfilename "redis-$test_redis_port.rdb" --save '' --appendonly no "$@" >"$work/redis-$test_redis_port.log" 2>&1 &
  test_redis_pid=$!
  pids+=("$test_redis_pid")
  for _ in $(seq 50); do redis-cli -p "$test_redis_port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
}
printf '* * * * * true\n' >"$work/evict.cron"
start_test_redis --maxmemory-policy allkeys-lru
expect_error "--require-noeviction refuses an evicting Redis" 2 "refusing to run: maxmemory-policy allkeys-lru lets Redis evict claims" -- \
  run "$work/evict.cron" --coordinator "redis://127.0.0.1:$test_redis_port" --require-noeviction
expect_error "--require-noeviction needs Redis" 2 "require_noeviction: only a Redis coordinator" -- \
  run "$work/evict.cron" --require-noeviction
metrics_port=$(pick_port)
"$bin" run "$work/evict.cron" --coordinator "redis://127.0.0.1:$test_redis_port" --metrics "127.0.0.1:$metrics_port" \
  >"$work/evict.log" 2>&1 &
evict_pid=$!
pids+=("$evict_pid")
if wait_for "$work/evict.log" "backend-config maxmemory-policy allkeys-lru lets Redis evict" 10; then
  ok "an evicting Redis is a warning naming the policy and the fix"
else
  bad "no backend-config warning: $(tail -3 "$work/evict.log")"
fi
if curl -s "http://127.0.0.1:$metrics_port/metrics" | grep -q '^fleetcron_backend_config_ok{maxmemory_policy="allkeys-lru"} 0$'; then
  ok "fleetcron_backend_config_ok is 0 with the policy as a label"
else
  bad "fleetcron_backend_config_ok: $(curl -s "http://127.0.0.1:$metrics_port/metrics" | grep backend_config)"
fi
kill -TERM "$evict_pid" 2>/dev/null; wait "$evict_pid" 2>/dev/null
kill "$test_redis_pid" 2>/dev/null; wait "$test_redis_pid" 2>/dev/null
start_test_redis --rename-command CONFIG ""
"$bin" run "$work/evict.cron" --coordinator "redis://127.0.0.1:$test_redis_port" >"$work/noconfig.log" 2>&1 &
noconfig_pid=$!
pids+=("$noconfig_pid")
if wait_for "$work/noconfig.log" "backend-config cannot read maxmemory-policy (CONFIG GET refused" 10 && kill -0 "$noconfig_pid"; then
  ok "CONFIG disabled: a warning, and the daemon runs on"
else
  bad "CONFIG disabled: $(tail -3 "$work/noconfig.log")"
fi
kill -TERM "$noconfig_pid" 2>/dev/null; wait "$noconfig_pid" 2>/dev/null
kill "$test_redis_pid" 2>/dev/null; wait "$test_redis_pid" 2>/dev/null

# pause-on-failure=yes on a daemon that keeps no fleet state: a warning
# that only a restart clears the pause, naming the job's line.
printf '# fleetcron: key=fragile pause-on-failure=yes\n0 3 * * * true\n' >"$work/fragile.cron"
"$bin" run "$work/fragile.cron" --catch-up 0 --history 0 >"$work/fragile.log" 2>&1 &
fragile_pid=$!
pids+=("$fragile_pid")
if wait_for "$work/fragile.log" "pause-local.*fragile.cron:2: pause-on-failure=yes pauses this job in this daemon alone" 10; then
  ok "pause-on-failure without a fleet state: a warning at load"
else
  bad "pause-on-failure without a fleet state: $(tail -3 "$work/fragile.log")"
fi
kill -TERM "$fragile_pid" 2>/dev/null; wait "$fragile_pid" 2>/dev/null

# A PostgreSQL schema without the tables: the daemon runs no DDL, it
# refuses to start and names what `fleetcron migrate` would create. The
# shared server when the test command started one, else a private cluster
# (stopped with the script: stopping it earlier would free this script's
# other ports).
if [[ -z ${FLEETCRON_TEST_POSTGRES_URL:-} ]]; then
  source "$(dirname "$0")/../../scripts/servers.sh"
  trap 'cleanup; stop_servers' EXIT
  start_postgres >/dev/null || bad "PostgreSQL did not start: the schema refusal is untested"
fi
if [[ -n ${FLEETCRON_TEST_POSTGRES_URL:-} ]]; then
  tables="claims_table=cli_$$_claims&leader_table=cli_$$_leader&fleet_prefix=cli_$$_"
  separator='?'
  [[ $FLEETCRON_TEST_POSTGRES_URL == *\?* ]] && separator='&'
  expect_error "a PostgreSQL schema without the tables is refused" 2 "schema object(s) missing on" -- \
    run "$work/evict.cron" --coordinator "$FLEETCRON_TEST_POSTGRES_URL$separator$tables"
  expect_error "the missing table is named" 2 "table cli_$$_claims is missing: run \`fleetcron migrate\`" -- \
    run "$work/evict.cron" --coordinator "$FLEETCRON_TEST_POSTGRES_URL$separator$tables"
fi

printf '# fleetcron: keep-failed=5000\n@daily true\n' >"$work/keep.cron"
# fleetcron logs: the whole output of a past run, attempts included, kept
# per job by count (keep-succeeded=2 prunes the third), and where a run is
# not kept a message that says so.
{
  echo '# fleetcron: key=chatty retries=1'
  echo '* * * * * *  for i in $(seq 1 3000); do echo "line $i of attempt $FLEETCRON_ATTEMPT"; done; echo oops >&2; [ "$FLEETCRON_ATTEMPT" = 2 ]'
  echo '# fleetcron: key=brief keep-succeeded=2'
  echo '* * * * * *  echo "brief $FLEETCRON_FIRE_KEY"'
} >"$work/logs.cron"
"$bin" run --seconds "$work/logs.cron" >"$work/logs.log" 2>&1 &
logs_pid=$!
pids+=("$logs_pid")
kept_ok() { (($("$bin" logs --list "$1" 2>/dev/null | grep -c ' succeeded ') >= $2)); }
deadline=$((SECONDS + 30))
until kept_ok chatty 1 && kept_ok brief 2 && (($(grep -c 'run-finished job=brief' "$work/logs.log") >= 4)) || ((SECONDS > deadline)); do sleep 0.2; done
kill -TERM "$logs_pid" 2>/dev/null; wait "$logs_pid" 2>/dev/null
chatty_fire=$("$bin" logs --list chatty | awk '$2 == "succeeded" {print $1; exit}')
out=$("$bin" logs chatty "$chatty_fire" 2>"$work/logs.err")
if [[ $? == 0 && $(grep -c '^line [0-9]* of attempt 1$' <<<"$out") == 3000 && $(grep -c '^line [0-9]* of attempt 2$' <<<"$out") == 3000 &&
      $(grep -c '^oops$' <<<"$out") == 2 && $(grep -n '^--- fleetcron: attempt 2 ---$' <<<"$out" | cut -d: -f1) -gt 3000 &&
      $(head -1 "$work/logs.err") == "# chatty  $chatty_fire  succeeded"* ]]; then
  ok "logs prints a run's whole output, both attempts (6,000 lines, beyond the ledger's 4 KiB tail)"
else
  bad "logs chatty $chatty_fire: $(wc -l <<<"$out") lines; stderr $(cat "$work/logs.err")"
fi
brief_runs=$("$bin" logs --list brief | grep -c ' succeeded ')
finished=$(grep -c 'run-finished job=brief' "$work/logs.log")
if [[ $brief_runs == 2 ]] && ((finished >= 3)); then
  ok "keep-succeeded=2 keeps the newest two of $finished runs' output"
else
  bad "keep-succeeded=2: $brief_runs kept of $finished runs: $("$bin" logs --list brief 2>&1)"
fi
newest=$("$bin" logs brief 2>/dev/null)
if [[ $newest == "brief brief@"* && $newest == *"$("$bin" logs --list brief | head -1 | awk '{print $1}')" ]]; then
  ok "logs JOB prints the newest run kept"
else
  bad "logs brief: $newest"
fi
expect_error "logs of a run not kept says so" 1 "no output of run 2020-01-01T00:00:00Z of job brief is kept in $STATE_DIRECTORY/runs" -- logs brief 2020-01-01T00:00:00Z
expect_error "logs with no output dir" 1 "this host keeps no runs' output (output_dir = none)" -- logs --output-dir none brief
expect_error "a relative output dir is refused" 2 'option --output-dir "runs": an absolute path, or none' -- logs --output-dir runs brief
expect_error "keep-failed= out of range names the option" 2 "keep-failed: expected 0..1000, got \"5000\"" -- validate "$work/keep.cron"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all daemon CLI checks passed"
