#!/usr/bin/env bash
# Chaos: three `fleetcron run` daemons share ten jobs firing every second
# through a real redis-server, nats-server or PostgreSQL cluster on
# loopback, while this script, driven by a seed, SIGKILLs and restarts
# daemons, SIGSTOPs them for longer than the lease and the claim TTL, and
# kills and restarts the server (PostgreSQL: an immediate shutdown, and
# pg_terminate_backend of every daemon connection). Every run appends "fire-key fence replica" to a journal.
#
#   chaos_test.sh FLEETCRON_BINARY redis|nats|nats-cluster|postgres SECONDS [SEED] [both|claim]
#
# nats-cluster: a three-node nats-server cluster, every bucket with three
# replicas, the daemons given every node. Instead of the server restart,
# three nodes are SIGKILLed for 5 s each, at a quarter, half and three
# quarters of the run: the node leading the claims' stream, the node
# leading the leader bucket's stream (claim mode: another node), and a
# node leading neither.
#
# CHAOS_FAULTS=partition: network faults instead of process and server
# faults. nats-cluster: each node in a network namespace of its own, the
# three and the host on one bridge (10.213.0.0/24); every 6..14 s one node
# is cut off for 3..12 s (healed 15 s before the end at the latest), from
# the other two nodes only (its clients still reach it: a minority node)
# or from everyone; one cut in three takes the claims' stream leader.
# Redis or PostgreSQL: each daemon runs in a network namespace of its
# own, linked to the server by a veth pair (10.211.R.0/24 for replica R,
# PostgreSQL 10.212.R.0/24);
# nftables inside the namespace cuts the link both ways, or one way, or
# drops 30 % of its packets at random, or (tests/support/delay_proxy.py,
# on the host side of every link: this kernel has no netem) delays each
# direction by 2 s, for 3 to 12 s, then heals it; one fault in six cuts
# off the leader. Besides the checks below, each
# job's ledger (`fleetcron history`) must list exactly the runs of the
# journal, each with its fence.
#
# Coordination `both` (default: a leader runs the fires, each claimed) or
# `claim`. Afterwards: duplicates must be 0; every lost fire is listed with
# its reason (a fault window it fell in — for a leader, up to the failover
# bound after it — or the skip a daemon logged) and an unexplained loss
# fails; fences never favour an instant older than the dedup window over a
# newer one. Every process it starts, it stops. KEEP_CHAOS=1 keeps the work
# directory, with the servers' logs under servers/.
set -euo pipefail
binary=$1 backend=$2 duration=$3 seed=${4:-$RANDOM} mode=${5:-both}
faults=${CHAOS_FAULTS:-process}
[[ $faults == process || ($faults == partition && $backend != nats) ]] ||
  { echo "CHAOS_FAULTS must be process, or partition with redis, postgres or nats-cluster"; exit 2; }
# partition: each backend its own subnets (CI runs them at once).
net=$(case $backend in postgres) echo 10.212 ;; nats-cluster) echo 10.213 ;; *) echo 10.211 ;; esac)
# partition: the daemons' own links (Redis, PostgreSQL), or the nodes' (nats-cluster).
links=$([[ $faults == partition && $backend != nats-cluster ]] && echo replicas || echo none)
[[ $faults == partition && $backend == nats-cluster ]] && links=nodes
# partition: the ledger keeps 10,000 records per job, one a second.
[[ $faults == process ]] || ((duration <= 9000)) || { echo "partition runs last at most 9000 s"; exit 2; }
[[ $mode == both || $mode == claim ]] || { echo "mode must be both or claim"; exit 2; }
((duration >= 30 && duration <= 86400)) || { echo "SECONDS must be 30..86400"; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/servers.sh"   # its EXIT trap stops the servers
source "$root/tests/support/cleanup.sh"
source "$root/tests/support/fleet_jobs.sh"
work=$(mktemp -d /tmp/fleetcron-chaos.XXXXXX)
export STATE_DIRECTORY=$work/state  # the daemons keep their runs' output under it (not /var/lib)
RANDOM=$seed
claim_ttl=10                # seconds; dedup window = ttl - 2 * ttl/4 = 5 s
dedup_window=5
daemon_pids=(0 0 0)
proxy_pids=()
cleanup() {
  local pid
  for pid in "${proxy_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  stop_daemons "${daemon_pids[@]}"
  # A kept run keeps the servers' own logs too (a cluster's elections).
  if [[ ${KEEP_CHAOS:-} == 1 ]]; then mkdir -p "$work/servers" && cp "$server_dir"/*.log "$work/servers/" 2>/dev/null || true; fi
  stop_servers
  local r
  for r in 0 1 2; do ip netns del "$(netns_of "$r")" 2>/dev/null || true; done
  for r in 0 1 2 sw; do ip netns del "fcnode$$-$r" 2>/dev/null || true; done
  remove_work "$work" "${KEEP_CHAOS:-}"
}
netns_of() { echo "fcchaos$$-$1"; }
trap cleanup EXIT
fail() { echo "FAIL (seed $seed): $*"; for f in "$work"/replica*.log; do echo "--- $f (tail)"; tail -n 10 "$f"; done; exit 1; }

# Leases: Redis 3 s (a follower polls every 500 ms: failover within 4 s);
# NATS 10 s, its minimum (failover within TTL + campaign interval, 17.5 s).
# partition: a namespace per replica, its veth pair, and the server on
# the host side of each (10.211.R.1; the replica is 10.211.R.2).
partition_setup() {
  local r ns
  for r in 0 1 2; do
    ns=$(netns_of "$r")
    ip netns add "$ns"
    ip link add "fch$$$r" type veth peer name "fcn$r" netns "$ns"
    ip addr add "$net.$r.1/24" dev "fch$$$r"
    ip link set "fch$$$r" up
    ip -n "$ns" addr add "$net.$r.2/24" dev "fcn$r"
    ip -n "$ns" link set "fcn$r" up
    ip -n "$ns" link set lo up
  done
}
# nats-cluster partitions: each node in a namespace of its own (10.213.0.N,
# N = node + 1), the three and the host (10.213.0.100) on one bridge in a
# fourth namespace; a fault cuts one node off from the other two (its
# clients still reach it), or from everyone.
node_links_setup() {
  local sw="fcnode$$-sw" i ns
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for i in 0 1 2; do
    ns="fcnode$$-$i"
    ip netns add "$ns"
    ip -n "$ns" link add eth0 type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "$net.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    nats_node_hosts[$i]=$net.0.$((i + 1)) nats_node_netns[$i]=$ns
  done
  ip link add "fcnh$$" type veth peer name ph netns "$sw"
  ip -n "$sw" link set ph master br0 up
  ip addr add "$net.0.100/24" dev "fcnh$$"
  ip link set "fcnh$$" up
}
if [[ $links == replicas ]]; then
  partition_setup || fail "network namespaces: could not set them up (root and iproute2 are needed)"
  export REDIS_EXTRA_BIND="$net.0.1 $net.1.1 $net.2.1" POSTGRES_EXTRA_LISTEN="$net.0.1,$net.1.1,$net.2.1"
elif [[ $links == nodes ]]; then
  node_links_setup || fail "network namespaces: could not set them up (root and iproute2 are needed)"
fi
case $backend in
  redis) start_redis; coordinator=$FLEETCRON_TEST_REDIS_URL; leader_ttl=3; failover=5 ;;
  nats) start_nats; coordinator="$FLEETCRON_TEST_NATS_URL?bucket=CHAOS_CLAIMS&leader_bucket=CHAOS_LEADER"; leader_ttl=10; failover=19 ;;
  nats-cluster)
    start_nats_cluster
    coordinator="$FLEETCRON_TEST_NATS_CLUSTER_URL?bucket=CHAOS_CLAIMS&leader_bucket=CHAOS_LEADER&replicas=3"
    leader_ttl=10; failover=19 ;;
  postgres)  # as Redis: a 3 s lease
    start_postgres; coordinator=$FLEETCRON_TEST_POSTGRES_URL; leader_ttl=3; failover=5
    "$binary" migrate --coordinator "$coordinator" >"$work/migrate.out" || fail "migrate: $(cat "$work/migrate.out")" ;;
  *) echo "unknown backend $backend"; exit 2 ;;
esac
server_port=${coordinator##*:}
server_port=${server_port%%[/?]*}
# partition: each replica's link goes through a delaying proxy on the host
# side (10.x.R.1:proxy_port[R]), idle until $work/delay<R> exists.
proxy_ports=()
if [[ $links == replicas ]]; then
  for r in 0 1 2; do
    python3 "$root/tests/support/delay_proxy.py" "$net.$r.1" 127.0.0.1 "$server_port" "$work/delay$r" 2 \
      >"$work/proxy$r.port" 2>"$work/proxy$r.log" &
    proxy_pids+=($!)
  done
  for r in 0 1 2; do  # each prints its port once it listens
    for _ in $(seq 100); do [[ -s $work/proxy$r.port ]] && break; sleep 0.1; done
    read -r "proxy_ports[$r]" <"$work/proxy$r.port" ||
      fail "the delaying proxy of replica $r did not start: $(cat "$work/proxy$r.log")"
  done
fi

journal=$work/journal actions=$work/actions
: >"$journal"
: >"$actions"
write_fleet_jobs "$work/jobs.cron" "$journal"

start_daemon() {  # replica number
  local netns=() uri=$coordinator extra=()
  # Every run of the run stays in the ledger, to be checked.
  [[ $faults == partition ]] && extra=(--history 10000)
  if [[ $links == replicas ]]; then  # in its namespace, through its own link
    netns=(ip netns exec "$(netns_of "$1")")
    uri=${coordinator/127.0.0.1:$server_port/$net.$1.1:${proxy_ports[$1]}}
  fi
  REPLICA=$1 "${netns[@]}" "$binary" run --seconds "$work/jobs.cron" --coordinator "$uri" --coordination "$mode" \
    "${extra[@]}" \
    --claim-ttl "${claim_ttl}s" --leader-ttl "${leader_ttl}s" --shutdown-grace 2s --log-format json \
    >>"$work/replica$1.log" 2>&1 &
  daemon_pids[$1]=$!
}
# The replica (0..2) whose daemon holds the lease, or a random one.
leader_replica() {
  local holder r
  holder=$("$binary" status --coordinator "$coordinator" --leader-ttl "${leader_ttl}s" 2>/dev/null |
    sed -n 's/^leader: "\(.*\)" .*/\1/p')
  for r in 0 1 2; do [[ $holder == *"-${daemon_pids[$r]}-"* ]] && { echo "$r"; return; }; done
  echo "none"
}
# One network fault on one replica's link, for 3..12 s, then healed.
partition_fault() {
  local kind=$((RANDOM % 6)) victim=$((RANDOM % 3)) length=$((3 + RANDOM % 10)) rules ns
  # Healed 15 s before the end at the latest, as the node faults are: the
  # cut replica's ledger writer retries its records (backing off up to 8 s
  # after a 12 s cut) before the daemons stop, and the check below wants
  # the ledger whole. A replica stopped while still cut off drops what it
  # could not write, logged (docs/fleet-state.md), which is no finding here.
  local left=$((started + duration - 15 - $(date +%s)))
  ((left >= 3)) || return 0
  ((length <= left)) || length=$left
  local leads=""
  if ((kind == 4)); then
    leads=$(leader_replica)
    if [[ $leads == none ]]; then kind=0; else victim=$leads; fi  # claim mode, or between leaders
  fi
  if ((kind == 5)); then  # every byte of its link held 2 s each way (4 s a round trip)
    note "delay $victim 2s ${length}s"
    : >"$work/delay$victim"
    sleep "$length"
    rm -f "$work/delay$victim"
    note "undelay $victim"
    return
  fi
  case $kind in
    0 | 4) rules="iifname \"fcn$victim\" drop; oifname \"fcn$victim\" drop" ;;
    1) rules="oifname \"fcn$victim\" drop" ;;   # its requests go nowhere
    2) rules="iifname \"fcn$victim\" drop" ;;   # its requests land, their answers do not
    3) rules="iifname \"fcn$victim\" numgen random mod 100 < 30 drop; oifname \"fcn$victim\" numgen random mod 100 < 30 drop" ;;
  esac
  ns=$(netns_of "$victim")
  ip netns exec "$ns" nft "add table inet fc; add chain inet fc in { type filter hook input priority 0; };
    add chain inet fc out { type filter hook output priority 0; }" || fail "nft: could not add the table"
  local rule
  IFS=';' read -ra parts <<<"$rules"
  for rule in "${parts[@]}"; do
    if [[ $rule == *iifname* ]]; then ip netns exec "$ns" nft "add rule inet fc in $rule"; else ip netns exec "$ns" nft "add rule inet fc out $rule"; fi
  done
  note "cut $victim $(case $kind in 0) echo both-ways ;; 1) echo outbound ;; 2) echo inbound ;; 3) echo 30%-loss ;; 4) echo leader-both-ways ;; esac) ${length}s"
  sleep "$length"
  ip netns exec "$ns" nft delete table inet fc
  note "heal $victim"
}
# One node cut off, for 3..12 s, then healed: from the other two nodes
# only (its clients still reach it: a minority node serving requests it
# cannot commit), or from everyone; one fault in three takes the node
# leading the claims' stream.
node_partition_fault() {
  local node=$((RANDOM % 3)) length=$((3 + RANDOM % 10)) kind=$((RANDOM % 3)) others="" i ns what
  # Healed 15 s before the end at the latest: the cluster elects its
  # leaders again before the daemons stop and flush their ledgers.
  local left=$((started + duration - 15 - $(date +%s)))
  ((left >= 3)) || return 0
  ((length <= left)) || length=$left
  if ((kind == 2)); then node=$(nats_stream_leader KV_CHAOS_CLAIMS || echo "$node"); fi
  for i in 0 1 2; do ((i == node)) || others+="${others:+, }$(nats_node_host "$i")"; done
  ns="fcnode$$-$node"
  ip netns exec "$ns" nft "add table inet fc; add chain inet fc in { type filter hook input priority 0; };
    add chain inet fc out { type filter hook output priority 0; }" || fail "nft: could not add the table"
  if ((kind == 1)); then
    ip netns exec "$ns" nft "add rule inet fc in iifname eth0 drop; add rule inet fc out oifname eth0 drop"
    what="from-everyone"
  else
    ip netns exec "$ns" nft "add rule inet fc in ip saddr { $others } drop; add rule inet fc out ip daddr { $others } drop"
    what="from-the-other-nodes"
  fi
  note "node-cut $node $what$( ((kind == 2)) && echo " (claims' stream leader)") ${length}s"
  sleep "$length"
  ip netns exec "$ns" nft delete table inet fc
  note "node-heal $node"
}
note() { echo "$(date +%s) $*" >>"$actions"; echo "+$(($(date +%s) - started))s $*"; }
wait_until() { while (($(date +%s) < $1)); do sleep 0.2; done; }   # pacing the faults, not synchronising

started=$(date +%s)
for r in 0 1 2; do start_daemon $r; done
echo "chaos: 3 daemons on $backend ($mode), ${duration}s, seed $seed; work $work"

# The faults: one every 6..14 s, at most one daemon down or paused at a
# time (so the fleet always has a healthy replica), one server restart
# at about 60 % of the run.
server_restart_at=$((started + duration * 6 / 10))
server_restarted=$([[ $faults == partition ]] && echo 1 || echo 0)
# nats-cluster: node faults instead (see the top).
node_faults=()
if [[ $backend == nats-cluster ]]; then
  server_restarted=1
  [[ $links == nodes ]] || node_faults=($((started + duration / 4)) $((started + duration / 2)) $((started + duration * 3 / 4)))
fi
node_fault=0
node_down() {  # which: claims | leader | neither
  local node claims leader
  claims=$(nats_stream_leader KV_CHAOS_CLAIMS || echo 0)
  leader=$(nats_stream_leader KV_CHAOS_LEADER || echo none)   # none: claim mode has no leader bucket
  case $1 in
    claims) node=$claims ;;
    leader) if [[ $leader == none ]]; then node=$(((claims + 1) % 3)); else node=$leader; fi ;;
    neither) for node in 0 1 2; do [[ $node != "$claims" && $node != "$leader" ]] && break; done ;;
  esac
  note "node-down $node (leads:$([[ $node == "$claims" ]] && echo " claims")$([[ $node == "$leader" ]] && echo " leader"))"
  nats_node_down "$node"
  sleep 5
  nats_node_up "$node"
  note "node-up $node"
}
# PostgreSQL also has every daemon connection terminated at about 30 %.
terminate_at=$((started + duration * 3 / 10))
terminated=$([[ $backend == postgres ]] && echo 0 || echo 1)
# Faults start once the fleet runs: a first leader paused or killed before
# it ran anything would push the first run past the failover bound (the
# check below), a property of the seed rather than of the daemons.
while [[ ! -s $journal ]] && (($(date +%s) < started + failover)); do sleep 0.2; done
next=$(($(date +%s) + 3))
while (($(date +%s) < started + duration - 8)); do
  wait_until "$next"
  now=$(date +%s)
  if ((node_fault < ${#node_faults[@]})) && ((now >= node_faults[node_fault])); then
    node_down "$(case $node_fault in 0) echo claims ;; 1) echo leader ;; *) echo neither ;; esac)"
    node_fault=$((node_fault + 1))
  elif ((server_restarted == 0 && now >= server_restart_at)); then
    note "server-down"
    case $backend in
      redis) restart_redis "$server_port" ;;
      nats) restart_nats "$server_port" ;;
      postgres) restart_postgres ;;
    esac
    note "server-up"
    server_restarted=1
  elif ((terminated == 0 && now >= terminate_at)); then
    note "clients-terminated $(terminate_postgres_clients)"
    terminated=1
  elif [[ $links == nodes ]]; then
    node_partition_fault
  elif [[ $faults == partition ]]; then
    partition_fault
  else
    victim=$((RANDOM % 3))
    # A daemon that died on its own is a finding, not a fault to inject.
    for r in 0 1 2; do
      kill -0 "${daemon_pids[$r]}" 2>/dev/null ||
        fail "daemon $r exited on its own ($(wait "${daemon_pids[$r]}" 2>/dev/null; echo "status $?"))"
    done
    if ((RANDOM % 2 == 0)); then
      note "kill $victim"
      kill -KILL "${daemon_pids[$victim]}"
      wait "${daemon_pids[$victim]}" 2>/dev/null || true   # SIGKILL: returns at once
      sleep "$((1 + RANDOM % 3))"
      start_daemon "$victim"
      note "start $victim"
    else
      pause=$((claim_ttl + 1 + RANDOM % 5))   # longer than the claim TTL and the lease
      note "stop $victim"
      kill -STOP "${daemon_pids[$victim]}"
      sleep "$pause"
      kill -CONT "${daemon_pids[$victim]}"
      note "cont $victim"
    fi
  fi
  next=$(($(date +%s) + 6 + RANDOM % 9))
done
((server_restarted == 1)) || fail "the run was too short for the server restart"
((node_fault == ${#node_faults[@]})) || fail "the run was too short for the node faults ($node_fault of ${#node_faults[@]})"
wait_until $((started + duration))
ended=$(date +%s)   # fires are checked up to here, not through the shutdown
for r in 0 1 2; do kill -TERM "${daemon_pids[$r]}" 2>/dev/null || true; done
# Bounded: a daemon that does not stop within its grace (2 s) + 10 s fails.
for r in 0 1 2; do
  for _ in $(seq 120); do kill -0 "${daemon_pids[$r]}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${daemon_pids[$r]}" 2>/dev/null; then fail "daemon $r did not stop within 12 s of SIGTERM"; fi
  wait "${daemon_pids[$r]}" 2>/dev/null || true
done
daemon_pids=(0 0 0)

# 1. No fire ran twice.
duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fire keys that ran more than once: $(echo "$duplicates" | head -5 | tr '\n' ' ')"

# 2. Fences are unique and positive; a larger fence never belongs to an
#    instant more than the dedup window older than a smaller one's.
awk '$2 == "" || $2 == 0 {bad++} END {exit bad > 0}' "$journal" || fail "runs without a fence"
# (awk, not head: under pipefail a head that exits early fails the pipeline
# with SIGPIPE, which set -e turns into a silent exit.)
# A JetStream cluster's leader stamps several writes per microsecond: two
# replicas' claims of different jobs may share a fence (docs/fencing.md),
# so there fences are unique per job; elsewhere, across the fleet.
if [[ $backend == nats-cluster ]]; then
  dup_fences=$(awk '{split($1, p, "@"); print p[1], $2}' "$journal" | sort | uniq -d | awk 'NR <= 3')
else
  dup_fences=$(awk '{print $2}' "$journal" | sort | uniq -d | awk 'NR <= 3')
fi
[[ -z $dup_fences ]] || fail "fences handed out twice: $dup_fences"
# One date process for every instant (not one each: on a busy host a
# thousand processes took minutes).
disorder=$(paste -d ' ' <(awk '{split($1, p, "@"); print p[1], $2}' "$journal") \
    <(awk '{split($1, p, "@"); print p[2]}' "$journal" | date -u -f - +%s) |
  sort -k1,1 -k2,2n | awk -v w="$dedup_window" '{if ($1 == job && $3 < newest - w) bad++; if ($1 != job || $3 > newest) newest = $3; job = $1} END {print bad + 0}')
((disorder == 0)) || fail "$disorder fence(s) favour an instant older than the dedup window"

# 3. Every fire in the window ran, or its loss has a reason.
lost=0 unexplained=0
declare -A reasons=()
# Every skip's reason, read once: fire key → the first word of its message.
declare -A skipped_for=()
while read -r key why; do
  [[ -n ${skipped_for[$key]:-} ]] || skipped_for[$key]=$why
done < <({ grep -h -F '"fire-skipped"' "$work"/replica*.log || true; } |
  sed -n 's/.*"fire":"\([^"]*\)".*"message":"\([a-z-]*\).*/\1 \2/p')
# The worst scheduling lag the daemons logged, in whole seconds rounded up:
# a busy host stretches every fault's window by as much.
lag_ms=$({ grep -h -F '"scheduling-lag"' "$work"/replica*.log || true; } | sed -n 's/.*up to \([0-9]*\) ms late.*/\1/p' |
  sort -n | awk 'END {print $1 + 0}')
lag=$(((lag_ms + 999) / 1000))
declare -A ran=()
while read -r key _; do ran[$key]=1; done <"$journal"
explain() {  # fire key, second → reason or empty
  local key=$1 t=$2
  if [[ -n ${skipped_for[$key]:-} ]]; then
    echo "skipped: ${skipped_for[$key]}"
    return
  fi
  # With a leader, a fault can also stop the runs until the next leader
  # takes over: up to the failover bound after it (claim mode: 1 s).
  awk -v t="$t" -v after="$(($([[ $mode == both ]] && echo "$failover" || echo 1) + lag))" '
    $2 == "kill" && t >= $1 - 1 && t <= $1 + after {print "daemon " $3 " killed holding its claim or the lease"; exit}
    $2 == "stop" {stopped[$3] = $1}
    $2 == "cont" && ($3 in stopped) && t >= stopped[$3] - 1 && t <= stopped[$3] + after {print "daemon " $3 " paused holding its claim or the lease"; exit}
    $2 == "cut" {cut[$3] = $1}
    $2 == "heal" && ($3 in cut) && t >= cut[$3] - 1 && t <= $1 + after {print "daemon " $3 " cut off from the store"; exit}
    $2 == "delay" {delayed[$3] = $1}
    $2 == "undelay" && ($3 in delayed) && t >= delayed[$3] - 1 && t <= $1 + 4 + after {print "daemon " $3 ": its link delayed"; exit}
    $2 == "server-down" {down = $1}
    $2 == "server-up" && t >= down - 1 && t <= $1 + 2 + after {print "server restart"; exit}
    $2 == "node-down" {node_down = $1; node_what = $4 $5 $6}
    $2 == "node-up" && t >= node_down - 1 && t <= $1 + 2 + after {print "node killed " node_what; exit}
    $2 == "node-cut" {node_cut = $1; cut_what = $4}
    $2 == "node-heal" && t >= node_cut - 1 && t <= $1 + 2 + after {print "node cut off " cut_what; exit}
    $2 == "clients-terminated" && t >= $1 - 1 && t <= $1 + 2 + after {print "connections terminated"; exit}
  ' "$actions"
}
# Coverage counts from the first run: the first election takes up to one
# campaign interval (NATS: 7.5 s) — but no longer than the failover bound.
first=$(awk '{split($1, p, "@"); print p[2]}' "$journal" | sort | awk 'NR == 1')
[[ -n $first ]] || fail "nothing ran"
first_run=$(date -u -d "$first" +%s)
((first_run <= started + failover)) || fail "the first run came $((first_run - started))s after the start (bound ${failover}s)"
from=$((first_run > started + 5 ? first_run : started + 5))
for ((t = from; t <= ended - 5; t++)); do
  TZ=UTC printf -v stamp '%(%Y-%m-%dT%H:%M:%SZ)T' "$t"
  for i in 0 1 2 3 4 5 6 7 8 9; do
    key="job$i@$stamp"
    [[ -n ${ran[$key]:-} ]] && continue
    lost=$((lost + 1))
    if [[ -n ${skipped_for[$key]:-} ]]; then why="skipped: ${skipped_for[$key]}"; else why=$(explain "$key" "$t"); fi
    if [[ -z $why ]]; then
      unexplained=$((unexplained + 1))
      echo "lost without a reason: $key"
    else
      reasons[$why]=$((${reasons[$why]:-0} + 1))
    fi
  done
done
echo "faults:"; sed 's/^/  /' "$actions"
for why in "${!reasons[@]}"; do echo "lost, $why: ${reasons[$why]}"; done
((unexplained == 0)) || fail "$unexplained fire(s) lost without a reason"

# 4. Partitions: the ledger lists exactly the journal's runs, each with
#    its fence (no run unrecorded, none recorded that did not run).
if [[ $faults == partition ]]; then
  for i in 0 1 2 3 4 5 6 7 8 9; do
    "$binary" history "job$i" -n 10000 --json --coordinator "$coordinator" |
      jq -r '.records[] | select(.fate == "succeeded" or .fate == "failed") | "\(.fire_key) \(.fence)"'
  done | sort >"$work/ledger_runs" || fail "history could not be read"
  awk '{print $1, $2}' "$journal" | sort >"$work/journal_runs"
  if ! cmp -s "$work/ledger_runs" "$work/journal_runs"; then
    # What the daemons said of the first fires that differ, and of their
    # ledgers: the next failure names its cause.
    for key in $(diff "$work/journal_runs" "$work/ledger_runs" | sed -n 's/^[<>] \([^ ]*\) .*/\1/p' | sort -u | awk 'NR <= 3'); do
      echo "--- $key: the journal, the ledger now, the logs"
      grep -h -F "$key " "$journal" || true
      "$binary" history "${key%%@*}" -n 10000 --json --coordinator "$coordinator" |
        jq -c --arg k "$key" '.records[] | select(.fire_key == $k)' || true
      grep -h -F "\"$key\"" "$work"/replica*.log | cut -c1-300 || true
    done
    grep -h -F '"message":"ledger' "$work"/replica*.log | cut -c1-300 | awk 'NR <= 20' || true
    fail "the ledger and the journal differ: $(diff "$work/journal_runs" "$work/ledger_runs" | awk 'NR <= 6' | tr '\n' ' ')"
  fi
  echo "ledger: $(wc -l <"$work/ledger_runs") runs, each as the journal has it"
fi
echo "ok (seed $seed): $(wc -l <"$journal") runs, 0 duplicates, fences in order, $lost fire(s) lost, each with its reason; scheduling lag up to ${lag_ms} ms"
