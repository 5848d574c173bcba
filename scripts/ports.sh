# Sourced by the test scripts: pick_port and release_ports.

# The ephemeral range's first port (32768 by default); test ports lie below.
port_floor=10000
port_ceiling=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
if ((port_ceiling < port_floor + 2000)); then port_floor=$((port_ceiling - 2000)); fi

# A random loopback port below the kernel's ephemeral range (the ports
# outgoing connections take: a listener there can collide with a client
# socket) that nothing listens on right now and no other test script
# holds: tests run in parallel, and a chaos test that restarts its server
# leaves the port free meanwhile, so each port is reserved (mkdir is
# atomic) until the script that took it exits (release_ports). A
# reservation whose owner is gone is taken over.
port_reservations=/tmp/fleetcron-ports
pick_port() {
  local port dir owner
  mkdir -p "$port_reservations"
  while :; do
    port=$((port_floor + RANDOM % (port_ceiling - port_floor)))
    dir=$port_reservations/$port
    if ! mkdir "$dir" 2>/dev/null; then
      owner=$(cat "$dir/owner" 2>/dev/null || true)
      if [[ -n $owner ]] && ! kill -0 "$owner" 2>/dev/null; then rm -rf "$dir"; fi
      continue
    fi
    echo "$$" >"$dir/owner"  # $$: the script, also inside $(pick_port)
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
    rm -rf "$dir"
  done
}

release_ports() {
  local owner_file
  for owner_file in "$port_reservations"/*/owner; do
    [[ -e $owner_file && $(cat "$owner_file" 2>/dev/null) == "$$" ]] && rm -rf "$(dirname "$owner_file")"
  done
  return 0
}

