#!/usr/bin/env bash
# Debian's own crontabs on a three-replica fleet (docs/daemon.md#system-crontabs):
# copies of /etc/crontab and of the /etc/cron.d files that cron, anacron,
# certbot, e2scrub_all, ntpsec, php, popularity-contest and sysstat
# install (tests/e2e/debian-crontabs/) validate as system crontabs, each
# line with its user, and are refused with the option that fixes them
# when read as a fleetcron jobs file. Then the same files, each job's spec
# made every second and its command a journal write, run on three
# replicas on Redis: every job runs, each fire once, as its line's user.
#   crontabs_test.sh FLEETCRON_BINARY
set -euo pipefail
binary=$1 backend=redis
name=crontabs bucket=CRONTABS_CLAIMS
source "$(dirname "$0")/../support/e2e_fleet.sh"
fixtures=$root/tests/e2e/debian-crontabs

# 1. As written. The ntpsec account exists only where ntpsec is installed:
#    elsewhere its line is refused naming the column, as it should be.
cp -r "$fixtures" "$work/etc"
if ! getent passwd ntpsec >/dev/null; then
  if "$binary" validate --crontab-format system "$work/etc/cron.d" >"$work/ntpsec.out" 2>&1; then
    fail "the ntpsec line validated without its account"
  fi
  grep -q 'ntpsec:1:11: the user column: user "ntpsec" does not exist' "$work/ntpsec.out" ||
    fail "the missing account's message: $(cat "$work/ntpsec.out")"
  rm "$work/etc/cron.d/ntpsec"
fi
"$binary" validate --crontab-format system "$work/etc/crontab" "$work/etc/cron.d" -n 1 >"$work/validate.out" 2>&1 ||
  fail "Debian's crontabs did not validate: $(cat "$work/validate.out")"
expected_jobs=$(cat "$work/etc/crontab" "$work/etc/cron.d"/[a-z]* | grep -cE '^[0-9*@]')
grep -q "^$expected_jobs job(s) in " "$work/validate.out" || fail "not $expected_jobs jobs: $(grep 'job(s)' "$work/validate.out")"
grep -q 'cron.d/.placeholder: skipped' "$work/validate.out" || fail ".placeholder was not reported skipped"
users=$(grep -c '^  user     root (uid 0' "$work/validate.out")
((users == expected_jobs)) || fail "$users of $expected_jobs jobs run as root"
grep -q "command  test -x /usr/bin/certbot -a \\\\! -d /run/systemd/system && perl" "$work/validate.out" ||
  fail "certbot's command changed: $(grep -A1 certbot "$work/validate.out" | head -3)"
# Outside /etc the format is not guessed: a cron.d copy read without the
# column has its "root" lines refused, naming the option.
if "$binary" validate "$work/etc/cron.d" >"$work/as-user-dir.out" 2>&1; then fail "cron.d validated as jobs files"; fi
grep -q 'anacron:6:17: the command starts with "root".*--crontab-format=system' "$work/as-user-dir.out" ||
  fail "the directory's refusal: $(cat "$work/as-user-dir.out")"
# Named on its own outside /etc, the system crontab is not guessed: refused with the option.
if "$binary" validate "$work/etc/crontab" >"$work/as-user.out" 2>&1; then fail "the system crontab validated as a jobs file"; fi
grep -q 'crontab:19:12: the command starts with "root", an account and no program on PATH.*--crontab-format=system' \
  "$work/as-user.out" || fail "the refusal: $(cat "$work/as-user.out")"

# 2. Run: every line's spec every second, its command a journal write;
#    one line moved to nobody shows the column switches the user.
run_copy() {  # FILE: the copy to run, written over FILE
  awk -v journal="$journal" -v file="${1##*/}" '
    /^[0-9*@]/ {
      n = split($0, f, /[ \t]+/)
      user = f[6]
      if (file == "sysstat" && f[1] == "59") user = "nobody"
      printf "# fleetcron: key=%s-%d\n", file, FNR  # the copies are one line: their derived keys would be too
      printf "* * * * * * %s echo \"$FLEETCRON_FIRE_KEY $(id -un) $REPLICA\" >> %s\n", user, journal
      next
    }
    { print }' "$1" >"$1.new"
  mv "$1.new" "$1"
}
for f in "$work/etc/crontab" "$work/etc/cron.d"/[a-z]*; do run_copy "$f"; done
chmod 777 "$work" && chmod 666 "$journal"  # nobody writes the journal too
start_replica() {
  REPLICA=$1 "$binary" run --seconds --crontab-format system "$work/etc/crontab" "$work/etc/cron.d" \
    --coordinator "$coordinator" --claim-ttl 5s --shutdown-grace 5s >"$work/replica-$1.log" 2>&1 &
  daemon_pids[$1]=$!
}
for r in 0 1 2; do start_replica "$r"; done
every_job_ran_thrice() {
  local keys pid
  for pid in "${daemon_pids[@]}"; do kill -0 "$pid" 2>/dev/null || fail "a replica exited"; done
  keys=$(awk '{split($1, p, "@"); print p[1]}' "$journal" | sort | uniq -c | awk '$1 >= 3' | wc -l)
  ((keys == expected_jobs))
}
wait_up_to 40 "every job to run three times" every_job_ran_thrice
for r in 0 1 2; do kill -TERM "${daemon_pids[$r]}"; done
for r in 0 1 2; do wait "${daemon_pids[$r]}" || fail "replica $r exited non-zero on SIGTERM"; done
daemon_pids=()

duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fires run twice: $(echo "$duplicates" | head -5 | tr '\n' ' ')"
nobody_runs=$(awk '$2 == "nobody"' "$journal" | wc -l)
root_runs=$(awk '$2 == "root"' "$journal" | wc -l)
other=$(awk '$2 != "nobody" && $2 != "root"' "$journal" | wc -l)
((nobody_runs >= 3 && other == 0)) || fail "runs by nobody: $nobody_runs, by other users: $other"
# The job moved to nobody ran only as nobody: one key, every run of it.
nobody_keys=$(awk '$2 == "nobody" {split($1, p, "@"); print p[1]}' "$journal" | sort -u | wc -l)
((nobody_keys == 1)) || fail "$nobody_keys jobs ran as nobody"
replicas=$(awk '{print $3}' "$journal" | sort -u | wc -l)
echo "ok: $expected_jobs Debian crontab jobs validated as system crontabs; run on $replicas replicas:" \
  "$((root_runs + nobody_runs)) runs, 0 duplicates, $nobody_runs as nobody"
