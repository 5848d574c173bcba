#!/usr/bin/env bash
# Redis over TLS, the daemon's side (docs/redis.md#tls): against a
# TLS-only redis-server with certificates made by openssl,
#  - a daemon that does not trust the server's CA does not start: exit 2,
#    `store-refused` naming the refused certificate; `fleetcron status`
#    exits 1 with the same reason;
#  - tls_verify=false is logged as a warning at start (and in every
#    description of the coordinator), and then runs fires;
#  - a daemon that trusts the CA runs every fire once;
#  - NATS over TLS (tls://) to a server whose certificate the system's CAs
#    do not trust: `run` exits 2 (store-refused), never a crash at exit
#    (nats.c and OpenSSL's cleanup used to segfault about one exit in two);
#    with ?tls_ca_file= two daemons run each fire once and stop cleanly.
#
#   tls_test.sh FLEETCRON_BINARY
set -euo pipefail
binary=$1 backend=redis-tls name=tls bucket=
source "$(dirname "$0")/../support/e2e_fleet.sh"

wrong_ca="${coordinator%tls_ca_file=*}tls_ca_file=$FLEETCRON_TEST_TLS_DIR/other-ca.pem"
printf '# fleetcron: key=tick\n* * * * * *  echo "$FLEETCRON_FIRE_KEY $REPLICA" >> %s\n' "$journal" >"$work/jobs.cron"
start() {  # replica, coordinator
  REPLICA=$1 "$binary" run --seconds "$work/jobs.cron" --coordinator "$2" >"$work/replica-$1.log" 2>&1 &
  daemon_pids[$1]=$!
}
# 1. The wrong CA: a configuration the server's certificate refuses, not
#    an outage: the daemon does not start (exit 2, store-refused).
status=0
timeout 60 "$binary" run --seconds "$work/jobs.cron" --coordinator "$wrong_ca" >"$work/replica-0.log" 2>&1 || status=$?
((status == 2)) || fail "a daemon whose CA refuses the server's certificate exited $status"
grep -q "store-refused .*certificate is refused: self-signed certificate in certificate chain.*not starting" \
  "$work/replica-0.log" || fail "no store-refused line: $(tail -2 "$work/replica-0.log")"
[[ ! -s $journal ]] || fail "a daemon that refused the server's certificate ran: $(head -3 "$journal")"
status=0
"$binary" status --coordinator "$wrong_ca" >"$work/status.out" 2>&1 || status=$?
((status == 1)) || fail "status with the wrong CA exited $status: $(cat "$work/status.out")"
grep -q "certificate is refused" "$work/status.out" || fail "status: $(cat "$work/status.out")"

# 2. Verification off: said so at start, then it claims and runs.
start 1 "$wrong_ca&tls_verify=false"
runs() { [[ $(grep -c ' 1$' "$journal") -ge 2 ]]; }
wait_up_to 20 "two runs without verification" runs
grep -q "warn  tls-unverified rediss://127.0.0.1:[0-9]*/0?tls_verify=false: TLS without verifying" "$work/replica-1.log" ||
  fail "no tls-unverified warning"
kill -TERM "${daemon_pids[1]}"; wait "${daemon_pids[1]}" || true

# 3. Two verified daemons: each fire once.
: >"$journal"
start 2 "$coordinator"
start 3 "$coordinator"
five() { (($(wc -l <"$journal") >= 5)); }
wait_up_to 20 "five runs of the verified fleet" five
for r in 2 3; do kill -TERM "${daemon_pids[$r]}"; done
for r in 2 3; do wait "${daemon_pids[$r]}" || true; done
duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d | wc -l)
((duplicates == 0)) || fail "$duplicates fires ran twice over TLS"
grep -q "tls-unverified" "$work/replica-2.log" && fail "a verified daemon warned tls-unverified"

# 4. NATS with TLS, a certificate this host does not trust: a refusal
#    (exit 2) like Redis's, and a clean exit each time.
nats_tls_port=$(pick_port)
nats-server -js -a 127.0.0.1 -p "$nats_tls_port" --tls --tlscert "$FLEETCRON_TEST_TLS_DIR/server.pem" \
  --tlskey "$FLEETCRON_TEST_TLS_DIR/server.key" -sd "$work/nats-store" >"$work/nats-tls.log" 2>&1 &
nats_tls_pid=$!
e2e_cleanup() { kill "$nats_tls_pid" 2>/dev/null; wait "$nats_tls_pid" 2>/dev/null; return 0; }
nats_tls_up() { grep -q "Server is ready" "$work/nats-tls.log"; }
wait_up_to 20 "nats-server with TLS" nats_tls_up
nats_uri="tls://127.0.0.1:$nats_tls_port?bucket=TLS_CLAIMS"
for attempt in 1 2 3 4; do
  status=0
  timeout 60 "$binary" run --seconds "$work/jobs.cron" --coordinator "$nats_uri" >"$work/nats-run.log" 2>&1 || status=$?
  ((status == 2)) || fail "NATS, attempt $attempt: a daemon refused by the server's certificate exited $status: $(tail -2 "$work/nats-run.log")"
  status=0
  "$binary" status --coordinator "$nats_uri" >"$work/nats-status.out" 2>&1 || status=$?
  ((status == 1)) || fail "NATS, attempt $attempt: status exited $status: $(cat "$work/nats-status.out")"
done
grep -q "store-refused .*SSL handshake error: .*not starting" "$work/nats-run.log" ||
  fail "NATS: no store-refused line: $(tail -2 "$work/nats-run.log")"
# 5. NATS with TLS and the fleet's CA (?tls_ca_file=): two daemons, each
#    fire once, and a clean stop.
: >"$journal"
nats_ca_uri="$nats_uri&tls_ca_file=$FLEETCRON_TEST_TLS_DIR/ca.pem"
for r in 4 5; do start "$r" "$nats_ca_uri"; done
wait_up_to 30 "five runs of the NATS TLS fleet" five
for r in 4 5; do kill -TERM "${daemon_pids[$r]}"; done
for r in 4 5; do
  status=0
  wait "${daemon_pids[$r]}" || status=$?
  ((status == 0)) || fail "NATS TLS replica $r exited $status on SIGTERM: $(tail -2 "$work/replica-$r.log")"
done
nats_duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d | wc -l)
((nats_duplicates == 0)) || fail "$nats_duplicates fires ran twice over NATS TLS"
nats_runs=$(wc -l <"$journal")
echo "ok: wrong CA: run exits 2 naming the certificate, status exits 1; tls_verify=false warned and ran;" \
  "verified fleet of 2, 0 duplicates; NATS over TLS refused: exit 2 (4 times, no crash); NATS TLS fleet of 2:" \
  "$nats_runs runs, 0 duplicates, clean stops"
