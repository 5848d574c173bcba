# Sourced by tests/e2e and tests/chaos: the crontab their daemons share.
# write_fleet_jobs JOBS_FILE JOURNAL — ten jobs firing every second, each
# appending "fire-key fence replica" to JOURNAL.
write_fleet_jobs() {
  local i
  {
    echo "# ten jobs, every second"
    for i in $(seq 0 9); do
      echo "# fleetcron: key=job$i"
      echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$FLEETCRON_FENCE \$REPLICA\" >> $2"
    done
  } >"$1"
}
