#!/usr/bin/env bash
# A leader that cannot claim: three `fleetcron run` daemons in both mode on
# a real redis-server or nats-server; the first one starts alone, with its
# wall clock 10 minutes ahead (libfaketime; steady time untouched), and
# takes the lease. Every claim it makes is refused for clock skew (Redis:
# the server's TIME; NATS: the timestamps the server gives its writes). It
# must step down within claim_failure_step_down (5 s) so that a replica
# that can claim leads; the review saw nothing run anywhere while it kept
# the lease. NATS also waits for the lease to expire (10 s).
#
#   skew_test.sh FLEETCRON_BINARY [redis|nats]
set -euo pipefail
binary=$1 backend=${2:-redis}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/servers.sh"   # its EXIT trap stops the servers
source "$root/tests/support/cleanup.sh"
source "$root/tests/support/fleet_jobs.sh"
work=$(mktemp -d /tmp/fleetcron-skew.XXXXXX)
export STATE_DIRECTORY=$work/state  # the daemons keep their runs' output under it (not /var/lib)
daemon_pids=()
cleanup() {
  stop_daemons "${daemon_pids[@]}"
  stop_servers
  remove_work "$work" "${KEEP_E2E:-}"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited $?"' ERR
fail() { echo "FAIL: $*"; for f in "$work"/replica*.log; do echo "--- $f (tail)"; tail -n 8 "$f"; done; exit 1; }
# libfaketime preloaded directly, not through the faketime wrapper: the
# wrapper forks, so its PID is not the daemon's and killing it left the
# skewed daemon running.
faketime_lib=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | awk 'NR == 1')
[[ -n $faketime_lib ]] || fail "libfaketime is not installed (scripts/deps.sh installs faketime)"

# Bounds on "runs resumed after the others joined": Redis: 5 s of refused
# claims + a follower poll, then the store's first claim finds no epoch
# record (a new store): 5 s of store-reset skips; measured 8-11 s, bound
# 17 s. NATS: the skewed leader first announces after a campaign interval
# (7.5 s), then 5 s of refused claims, then it resigns at its next tick
# (<= 7.5 s); measured 15 s, bound 28 s.
case $backend in
  redis) start_redis; coordinator=$FLEETCRON_TEST_REDIS_URL; leader_ttl=3; takeover_bound=17; lead_bound=10 ;;
  nats) start_nats; coordinator=$FLEETCRON_TEST_NATS_URL; leader_ttl=10; takeover_bound=28; lead_bound=20 ;;
  *) echo "backend must be redis or nats"; exit 2 ;;
esac
journal=$work/journal
: >"$journal"
write_fleet_jobs "$work/jobs.cron" "$journal"
start_daemon() {  # replica number, then a command prefix (faketime) if any
  local replica=$1
  shift
  REPLICA=$replica "$@" "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" \
    --coordination both --leader-ttl "${leader_ttl}s" --claim-ttl 10s --log-format json >"$work/replica$replica.log" 2>&1 &
  daemon_pids[$replica]=$!
}
leader() { "$binary" status --coordinator "$coordinator" 2>/dev/null | sed -n 's/^leader: "\(.*\)" .*/\1/p'; }

# Replica 0, 10 minutes ahead, alone: it takes the lease.
start_daemon 0 env LD_PRELOAD="$faketime_lib" FAKETIME=+10m FAKETIME_DONT_FAKE_MONOTONIC=1
deadline=$((SECONDS + lead_bound))
while [[ -z $(leader) ]] && ((SECONDS < deadline)); do sleep 0.1; done
skewed_leader=$(leader)
[[ -n $skewed_leader ]] || fail "the skewed replica never took the lease"
start_daemon 1
start_daemon 2
joined=$SECONDS
echo "skewed replica 0 leads ($skewed_leader); replicas 1 and 2 joined"

# Within the step-down bound (5 s) plus a follower poll and a fire (NATS:
# plus the lease's expiry): runs.
deadline=$((joined + takeover_bound))
while ! grep -q ' [12]$' "$journal" && ((SECONDS < deadline)); do sleep 0.2; done
grep -q ' [12]$' "$journal" || fail "no replica ran anything within ${takeover_bound}s while the skewed one led; $("$binary" status --coordinator "$coordinator" 2>&1 | head -3)"
took=$((SECONDS - joined))
grep -q 'stepping down' "$work/replica0.log" || fail "the skewed replica did not log its step-down"
[[ $(leader) != "$skewed_leader" ]] || fail "the skewed replica still holds the lease"
# One identity: the leader `status` names is one of the replicas it lists.
new_leader=$(leader)
replica_ids=$("$binary" status --coordinator "$coordinator" --json 2>/dev/null | jq -r '.replicas[].id')
grep -qxF "$new_leader" <<<"$replica_ids" || fail "status names leader \"$new_leader\", not one of the replicas: $(tr '\n' ' ' <<<"$replica_ids")"
# Then the fleet runs every fire: 5 s later, the last full second has all ten.
sleep 5   # pacing: let the new leader run a few seconds
for r in 0 1 2; do kill -TERM "${daemon_pids[$r]}" 2>/dev/null || true; done
for r in 0 1 2; do wait "${daemon_pids[$r]}" 2>/dev/null || true; done
duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d | wc -l)
((duplicates == 0)) || fail "$duplicates fire key(s) ran twice"
! grep -q ' 0$' "$journal" || fail "the skewed replica ran fires although every claim of its was refused"
full=$(awk '{split($1, p, "@"); print p[2]}' "$journal" | sort | uniq -c | awk '$1 == 10' | wc -l)
((full >= 3)) || fail "only $full second(s) had all ten fires after the takeover"
grep -q '"message":"clock-skew' "$work/replica0.log" || fail "the skewed replica logged no clock-skew skip"
# One clock (docs/fleet-state.md): the replica 10 minutes ahead judged the
# registry on the store's clock (it reported no live run lost) and dated
# nothing into the fleet's ledger (no clock-skew records).
! grep -q '"event":"fire-lost"' "$work"/replica*.log || fail "a live run was reported lost: $(grep -h '"fire-lost"' "$work"/replica*.log | head -2)"
history=$("$binary" history -n 2000 --coordinator "$coordinator" --json 2>&1) || fail "history: $history"
grep -q '"fate":"succeeded"' <<<"$history" || fail "history shows no run: ${history:0:300}"
! grep -q 'clock-skew' <<<"$history" || fail "the skewed replica's skips were dated into the ledger: $(grep -o '.\{80\}clock-skew.\{80\}' <<<"$history" | head -2)"
echo "ok ($backend): runs resumed ${took}s after the others joined (bound ${takeover_bound}s); $full full seconds; 0 duplicates"
