#!/usr/bin/env bash
# Store faults on real servers (issue 13): three `fleetcron run` daemons in
# claim mode share ten jobs firing every second while the store forgets,
# goes back or fills up. Replica 0 is paused (SIGSTOP) across the fault,
# so it comes back with fires that the others claimed before the fault:
# the repeat a store reset used to cause.
#
#   store_faults_test.sh FLEETCRON_BINARY SCENARIO
#
#   redis-flushall   FLUSHALL while replica 0 is paused
#   redis-restart    redis-server restarted empty while replica 0 is paused
#   redis-failover   a failover to a replica that lacks the last writes: the
#                    replica is stopped (replication stalls), the primary
#                    takes writes, is killed, the replica is promoted; the
#                    daemons reach the store through a socket symlink that
#                    moves to the replica
#   redis-sentinel   a primary, a replica and three sentinels; the daemons
#                    reach the primary through the sentinels
#                    (redis-sentinel://); the primary is SIGKILLed, the
#                    sentinels promote the replica, the daemons follow; the
#                    old primary comes back empty and is made a replica
#   redis-oom        maxmemory with noeviction, memory filled: claims fail
#                    closed (claim-error) until memory is freed
#   nats-lost-volume nats-server restarted without its store directory
#   nats-store-full  JetStream's file store (1 MB) filled to the last
#                    byte by another stream: claims fail closed until that
#                    stream is deleted
#
# Afterwards: no fire key ran twice; every fire in the window ran or has a
# logged skip (or fell in replica 0's pause, holding its claim); the
# scenario's own reason was logged (store-reset, claim-error); runs resumed.
set -euo pipefail
binary=$1 scenario=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/servers.sh"   # its EXIT trap stops the servers
source "$root/tests/support/cleanup.sh"
source "$root/tests/support/fleet_jobs.sh"
work=$(mktemp -d /tmp/fleetcron-faults.XXXXXX)
export STATE_DIRECTORY=$work/state  # the daemons keep their runs' output under it (not /var/lib)
claim_ttl=20   # max clock skew 5 s (the daemon's default), dedup window 10 s
daemon_pids=(0 0 0)
cleanup() {
  stop_daemons "${daemon_pids[@]}"
  stop_servers
  remove_work "$work" "${KEEP_FAULTS:-}"
}
trap cleanup EXIT
trap 'echo "FAIL ($scenario): line $LINENO: $BASH_COMMAND exited $?"' ERR
fail() { echo "FAIL ($scenario): $*"; for f in "$work"/replica*.log; do echo "--- $f (tail)"; tail -n 8 "$f"; done; exit 1; }
note() { echo "$(date +%s) $*" >>"$actions"; echo "+$(($(date +%s) - started))s $*"; }
at() { while (($(date +%s) < started + $1)); do sleep 0.1; done; }   # pacing the faults, not synchronising

# A redis-server of our own, on a Unix socket and a port; tracked for
# cleanup (no subshell: server_pids must see it).
own_redis() {  # name, more args → sets own_pid and own_port once it answers
  local name=$1
  shift
  own_port=$(pick_port)
  redis-server --port "$own_port" --bind 127.0.0.1 --unixsocket "$work/$name.sock" --dir "$work" \
    --dbfilename "$name.rdb" --save '' --appendonly no \
    --daemonize no --logfile "$work/$name.log" "$@" &
  own_pid=$!
  server_pids+=("$own_pid")
  for _ in $(seq 200); do
    redis-cli -s "$work/$name.sock" PING 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  fail "redis-server $name did not start: $(tail -3 "$work/$name.log")"
}

# A sentinel of our own watching the primary on `primary_port` as "fleet".
own_sentinel() {  # name
  local name=$1 port
  port=$(pick_port)
  printf 'sentinel monitor fleet 127.0.0.1 %s 2\nsentinel down-after-milliseconds fleet 1000\nsentinel failover-timeout fleet 3000\n' \
    "$primary_port" >"$work/$name.conf"
  redis-server "$work/$name.conf" --sentinel --port "$port" --bind 127.0.0.1 --dir "$work" \
    --logfile "$work/$name.log" &
  server_pids+=("$!")
  for _ in $(seq 200); do
    redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && { sentinels+="${sentinels:+,}127.0.0.1:$port"; return 0; }
    sleep 0.05
  done
  fail "sentinel $name did not start: $(tail -3 "$work/$name.log")"
}

expect_reason=""
case $scenario in
  redis-flushall | redis-restart)
    start_redis; coordinator=$FLEETCRON_TEST_REDIS_URL; expect_reason=store-reset ;;
  redis-failover)
    own_redis primary; primary_pid=$own_pid
    own_redis replica --replicaof 127.0.0.1 "$own_port"; replica_pid=$own_pid
    ln -s "$work/primary.sock" "$work/redis.sock"
    coordinator="unix:$work/redis.sock"; expect_reason=store-reset ;;
  redis-sentinel)
    own_redis primary; primary_pid=$own_pid primary_port=$own_port
    own_redis replica --replicaof 127.0.0.1 "$primary_port"; replica_port=$own_port
    sentinels=""
    for s in 1 2 3; do own_sentinel "sentinel$s"; done
    for _ in $(seq 200); do  # every sentinel sees the replica and its two peers
      known=0
      for address in ${sentinels//,/ }; do
        n=$(redis-cli -p "${address##*:}" SENTINEL REPLICAS fleet 2>/dev/null | grep -c '^name$' || true)
        p=$(redis-cli -p "${address##*:}" SENTINEL SENTINELS fleet 2>/dev/null | grep -c '^name$' || true)
        ((n == 1 && p == 2)) && known=$((known + 1))
      done
      ((known == 3)) && break
      sleep 0.1
    done
    ((known == 3)) || fail "the sentinels did not find the replica and each other"
    coordinator="redis-sentinel://$sentinels/fleet"; expect_reason=store-reset ;;
  redis-oom)
    own_redis oom --maxmemory 3mb --maxmemory-policy noeviction --enable-debug-command yes
    coordinator="unix:$work/oom.sock"; expect_reason=claim-error ;;
  nats-lost-volume)
    start_nats; coordinator="$FLEETCRON_TEST_NATS_URL"; expect_reason=store-reset ;;
  nats-store-full)
    port=$(pick_port)
    printf 'listen: 127.0.0.1:%s\njetstream { store_dir: "%s", max_file_store: 1MB }\n' "$port" "$work/js" >"$work/nats.conf"
    nats-server -c "$work/nats.conf" >"$work/nats.log" 2>&1 &
    server_pids+=("$!")
    for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
    coordinator="nats://127.0.0.1:$port"; expect_reason=claim-error ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac

journal=$work/journal actions=$work/actions
: >"$journal"
: >"$actions"
write_fleet_jobs "$work/jobs.cron" "$journal"
start_daemon() {  # replica number
  REPLICA=$1 "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --coordination claim \
    --claim-ttl "${claim_ttl}s" --shutdown-grace 2s --log-format json >>"$work/replica$1.log" 2>&1 &
  daemon_pids[$1]=$!
}
started=$(date +%s)
for r in 0 1 2; do start_daemon $r; done
echo "store faults: $scenario; 3 daemons (claim, TTL ${claim_ttl}s); work $work"

at 10
note "stop 0"
kill -STOP "${daemon_pids[0]}"
at 11
case $scenario in
  redis-flushall) note "flushall"; redis-cli -u "$coordinator" FLUSHALL >/dev/null ;;
  redis-restart) note "server restart (empty)"; port=${coordinator##*:}; restart_redis "${port%%/*}" ;;
  redis-failover)
    note "replication stalls"; kill -STOP "$replica_pid"
    at 13   # the primary takes two seconds of writes the replica never sees
    note "primary killed, replica promoted"
    kill_and_reap "$primary_pid"
    kill -CONT "$replica_pid"
    redis-cli -s "$work/replica.sock" REPLICAOF NO ONE >/dev/null
    ln -s "$work/replica.sock" "$work/redis.sock.new" && mv -T "$work/redis.sock.new" "$work/redis.sock" ;;
  redis-sentinel)
    note "primary killed (the sentinels fail over)"
    kill_and_reap "$primary_pid"
    forget_pid "$primary_pid" ;;
  redis-oom)
    note "memory full"; redis-cli -s "$work/oom.sock" DEBUG POPULATE 60000 junk 100 >/dev/null ;;
  nats-lost-volume) note "server restart without its store"; restart_nats "${coordinator##*:}" lose-store ;;
  nats-store-full)
    note "store filled: $(python3 "$root/tests/support/nats_fill.py" 127.0.0.1 "${coordinator##*:}" fill)" ;;
esac
at 16
note "cont 0"
kill -CONT "${daemon_pids[0]}"
if [[ $scenario == redis-sentinel ]]; then
  at 20
  promoted=$(redis-cli -p "${sentinels##*:}" SENTINEL GET-MASTER-ADDR-BY-NAME fleet | tail -1)
  [[ $promoted == "$replica_port" ]] || fail "the sentinels name port $promoted as the primary, not the replica's $replica_port"
  note "old primary back, empty (the sentinels make it a replica)"
  redis-server --port "$primary_port" --bind 127.0.0.1 --unixsocket "$work/primary.sock" --dir "$work" \
    --dbfilename primary.rdb --save '' --appendonly no --daemonize no --logfile "$work/primary.log" &
  server_pids+=("$!")
fi
if [[ $scenario == nats-store-full ]]; then
  at 18
  note "store freed: $(python3 "$root/tests/support/nats_fill.py" 127.0.0.1 "${coordinator##*:}" free)"
fi
if [[ $scenario == redis-oom ]]; then
  at 18
  note "memory freed"
  redis-cli -s "$work/oom.sock" EVAL "for _, k in ipairs(redis.call('KEYS', 'junk:*')) do redis.call('DEL', k) end" 0 >/dev/null
fi
at 34
ended=$(date +%s)
for r in 0 1 2; do kill -TERM "${daemon_pids[$r]}" 2>/dev/null || true; done
for r in 0 1 2; do
  for _ in $(seq 120); do kill -0 "${daemon_pids[$r]}" 2>/dev/null || break; sleep 0.1; done
  kill -0 "${daemon_pids[$r]}" 2>/dev/null && fail "daemon $r did not stop within 12 s of SIGTERM"
  wait "${daemon_pids[$r]}" 2>/dev/null || true
done
daemon_pids=(0 0 0)

# 1. No fire ran twice.
duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fire keys that ran more than once: $(echo "$duplicates" | awk 'NR <= 5' | tr '\n' ' ')"

# 2. Every fire in the window ran, or its loss has a reason.
skips=$work/skips
{ grep -h -F fire-skipped "$work"/replica*.log || true; } |
  sed -n 's/.*"fire":"\([^"]*\)".*"message":"\([a-z-]*\).*/\1 \2/p' | sort -u >"$skips"
declare -A reasons=()
lost=0 unexplained=0
declare -A ran=()
while read -r key _; do ran[$key]=1; done <"$journal"
stamp_of() { TZ=UTC printf -v "$1" '%(%Y-%m-%dT%H:%M:%SZ)T' "$2"; }
for ((t = started + 3; t <= ended - 3; t++)); do
  stamp_of stamp "$t"
  for i in 0 1 2 3 4 5 6 7 8 9; do
    key="job$i@$stamp"
    [[ -n ${ran[$key]:-} ]] && continue
    lost=$((lost + 1))
    # The scenario's reason if a replica gave it, else the first one logged.
    why=$(awk -v k="$key" -v want="$expect_reason" '$1 == k {if (!first) first = $2; if ($2 == want) {print want; found = 1; exit}}
      END {if (!found && first) print first}' "$skips")
    if [[ -z $why ]] && ((t >= started + 9 && t <= started + 17)); then why="claimed by replica 0, then paused"; fi
    if [[ -z $why ]]; then
      unexplained=$((unexplained + 1)); echo "lost without a reason: $key"
    else
      reasons[$why]=$((${reasons[$why]:-0} + 1))
    fi
  done
done
echo "faults:"; sed 's/^/  /' "$actions"
for why in "${!reasons[@]}"; do echo "lost, $why: ${reasons[$why]}"; done
((unexplained == 0)) || fail "$unexplained fire(s) lost without a reason"
# 3. The scenario's reason was logged, after the fault (a new store's first
#    claims at the start are store-reset too: count those after +10 s).
fault_at=$((started + 10))
after_fault=$(paste -d ' ' "$skips" <(awk '{split($1, p, "@"); print p[2]}' "$skips" | date -u -f - +%s) |
  awk -v from="$fault_at" -v want="$expect_reason" '$2 == want && $3 >= from {n++} END {print n + 0}')
((after_fault > 0)) || fail "no fire was skipped $expect_reason after the fault"
# 4. The fleet runs again: each of the ten jobs ran at each of the last
#    three seconds checked. A fire skipped overlap counts as taken: on a
#    busy host a run outlasts the second between two fires.

for ((t = ended - 5; t <= ended - 3; t++)); do
  stamp_of stamp "$t"
  # Distinct fires: one skipped by the local rule on one replica may have run on another.
  count=$({ awk -v s="@$stamp" 'index($1, s) {print $1}' "$journal"
            awk -v s="@$stamp" 'index($1, s) && $2 == "overlap" {print $1}' "$skips"; } | sort -u | wc -l)
  ((count == 10)) || fail "only $count of 10 fires ran at $stamp, long after the fault"
done
echo "ok ($scenario): $(wc -l <"$journal") runs, 0 duplicates, $lost fire(s) lost, each with its reason ($after_fault $expect_reason after the fault)"
