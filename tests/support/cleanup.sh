# Sourced by the test scripts: what their EXIT traps share.

# stop_daemons PID...: each daemon given (0, empty: none) resumed if it
# was paused, killed and reaped; only these (a bare `wait` would also wait
# for the servers, which stop_servers stops).
stop_daemons() {
  local pid
  for pid in "$@"; do
    [[ $pid =~ ^[1-9][0-9]*$ ]] || continue  # never 0 or -1: those signal groups
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "$@"; do
    [[ $pid =~ ^[1-9][0-9]*$ ]] || continue
    wait "$pid" 2>/dev/null || true
  done
}

# remove_work DIR [KEEP]: DIR removed, unless KEEP is 1 (its path printed).
remove_work() {
  if [[ ${2:-} == 1 ]]; then echo "kept $1"; else rm -rf "$1"; fi
}
