#!/usr/bin/env python3
"""bench/fleet_bench.sh's arithmetic: the cost of starting `true`, and the
report of one run (its window's snapshots and the daemons' JSON logs)."""
import argparse
import datetime
import json
import pathlib
import statistics
import subprocess
import sys
import time


def start_cost():
    """Median milliseconds to fork, exec and reap `/bin/sh -c true`, as a run does."""
    samples = []
    for _ in range(100):
        began = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
        samples.append((time.perf_counter() - began) * 1000)
    print(f"{statistics.median(samples):.2f}")


def read_snapshot(path):
    snap = {"daemons": {}, "commands": {}, "rss": {}, "children": {}}
    for line in path.read_text().splitlines():
        words = line.split()
        if words[0] == "time":
            snap["time"] = int(words[1]) / 1e9
        elif words[0] == "daemon":
            snap["daemons"][words[1]] = int(words[2])
        elif words[0] == "rss":
            snap["rss"][words[1]] = int(words[2])
        elif words[0] == "store_child":
            snap["children"][words[1]] = int(words[2])
        elif line.startswith("cmdstat_"):
            name, fields = line[len("cmdstat_"):].split(":", 1)
            calls = dict(f.split("=") for f in fields.split(","))
            snap["commands"][name] = int(calls["calls"])
        elif line.startswith("used_cpu_"):
            key, value = line.split(":")
            snap[key] = float(value)
        else:
            snap[words[0]] = float(words[1])
    return snap


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def start_ms(work, replicas):
    """The longest time from a replica's spawn to its `started` line, in ms."""
    spawned = {int(r): int(ns) / 1e9 for ns, r in (line.split() for line in (work / "spawned").read_text().splitlines())}
    longest = 0.0
    for r in range(replicas):
        for line in (work / f"replica{r}.log").read_text().splitlines():
            if '"event":"started"' in line:
                longest = max(longest, parse_time(json.loads(line)["time"]) - spawned[r])
                break
    return longest * 1000


def skipped_fires(work, replicas):
    """Every fire-skipped line: fire key -> its reason's first words."""
    skipped = {}
    for r in range(replicas):
        for line in (work / f"replica{r}.log").read_text().splitlines():
            if '"fire-skipped"' in line:
                event = json.loads(line)
                skipped[event["fire"]] = event["message"].split(":")[0]
    return skipped


def missing_fires(runs, every, start, end, burst, burst_at):
    """The fires due in the window (every job's each second, the burst) that no replica started."""
    def key(name, at):
        return f"{name}@{datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    due = {key(f"every{i}", t) for i in range(every) for t in range(start, end)}
    if start <= burst_at < end:
        due |= {key(f"burst{i}", burst_at) for i in range(burst)}
    return sorted(due - {fire for fire, _, _, _ in runs})


def read_runs(work, replicas):
    """Every run-started line (attempt 1): (fire key, instant, started, replica)."""
    runs = []
    for r in range(replicas):
        for line in (work / f"replica{r}.log").read_text().splitlines():
            if '"run-started"' not in line:
                continue
            event = json.loads(line)
            if not event["message"].startswith("attempt 1 "):
                continue
            fire = event["fire"]
            runs.append((fire, parse_time(fire.rsplit("@", 1)[1]), parse_time(event["time"]), r))
    return runs


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def store_work(args, before, after, fires):
    """(label, per-fire count, CPU µs per fire, breakdown) of the store."""
    ticks = args.clock_ticks
    if args.backend == "redis":
        calls = {k: after["commands"].get(k, 0) - before["commands"].get(k, 0) for k in after["commands"]}
        calls = {k: v for k, v in calls.items() if v}
        cpu = (after["used_cpu_sys"] + after["used_cpu_user"] - before["used_cpu_sys"] - before["used_cpu_user"])
        breakdown = ", ".join(f"{k} {v / fires:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1]))
        return "Redis commands (inner calls included)", sum(calls.values()) / fires, cpu * 1e6 / fires, breakdown
    if args.backend == "postgres":
        living = sum(after["children"].get(c, 0) - before["children"].get(c, 0) for c in after["children"])
        reaped = after["store_children_ticks"] - before["store_children_ticks"]
        own = after["store_cpu_ticks"] - before["store_cpu_ticks"]
        cpu = (living + reaped + own) / ticks
        return "PostgreSQL transactions", (after["transactions"] - before["transactions"]) / fires, cpu * 1e6 / fires, ""
    cpu = (after["store_cpu_ticks"] - before["store_cpu_ticks"]) / ticks
    api = (after["jetstream_api"] - before["jetstream_api"]) / fires
    return ("NATS messages in (requests and publishes)", (after["messages_in"] - before["messages_in"]) / fires,
            cpu * 1e6 / fires, f"JetStream API calls {api:.2f}")


def report(args):
    work = pathlib.Path(args.work)
    before = read_snapshot(work / "before")
    after = read_snapshot(work / "after")
    runs = read_runs(work, args.replicas)
    keys = [fire for fire, _, _, _ in runs]
    duplicates = len(keys) - len(set(keys))
    start, end = args.window_start, args.window_start + args.window
    in_window = [run for run in runs if start <= run[1] < end]
    fires = max(1, len(in_window))
    expected = args.every * args.window + (args.burst if start <= args.burst_at < end else 0)
    label, per_fire, store_us, breakdown = store_work(args, before, after, fires)
    elapsed = after["time"] - before["time"]
    daemon_cpu = sum(after["daemons"][p] - before["daemons"].get(p, 0) for p in after["daemons"]) / args.clock_ticks
    rss_mb = sum(after["rss"].values()) / 1024 / max(1, len(after["rss"]))
    burst = [(started - instant) * 1000 for fire, instant, started, _ in runs if fire.startswith("burst")]
    print(f"fleet_bench {args.backend}, {args.replicas} replicas ({args.mode}), {args.jobs} jobs "
          f"({args.every} every second, a burst of {args.burst}), window {args.window} s")
    print(f"  fires: {len(in_window)} of {expected} due in the window, {len(in_window) / elapsed:.0f}/s; "
          f"duplicates: {duplicates}")
    not_started = missing_fires(runs, args.every, start, end, args.burst, args.burst_at)
    skips = skipped_fires(work, args.replicas)
    reasons = {}
    for fire in not_started:
        if fire in skips:
            reasons[skips[fire]] = reasons.get(skips[fire], 0) + 1
    if reasons:
        print(f"  skipped (logged, in the ledger): {', '.join(f'{n} {why}' for why, n in sorted(reasons.items()))}")
    missing = [fire for fire in not_started if fire not in skips]
    if missing:
        print(f"  MISSING: {len(missing)} fire(s) due in the window neither started nor skipped: {', '.join(missing[:5])}")
    print(f"  store: {per_fire:.2f} {label} per fire, {store_us:.0f} us of its CPU per fire")
    if breakdown:
        print(f"    per fire: {breakdown}")
    print(f"  daemons: {daemon_cpu * 1e6 / fires:.0f} us CPU per fire (all replicas), "
          f"{rss_mb:.1f} MB resident each, {rss_mb * 1024 * 1024 / args.jobs:.0f} B per job")
    if burst:
        print(f"  burst of {len(burst)} of {args.burst}: lateness p50 {percentile(burst, 0.5):.0f} ms, "
              f"p99 {percentile(burst, 0.99):.0f} ms, max {max(burst):.0f} ms "
              f"(starting `true` costs {args.start_cost_ms:.1f} ms here, not subtracted)")
    else:
        print(f"  burst: none of the {args.burst} ran in the logs")
    started_ms = start_ms(work, args.replicas)
    print(f"  start {started_ms:.0f} ms (the slowest replica's), validate {args.validate_ms} ms, "
          f"reload {args.reload_ms} ms for {args.jobs} jobs")
    print(f"point backend={args.backend} replicas={args.replicas} jobs={args.jobs} fires_per_s={len(in_window) / elapsed:.0f} "
          f"store_per_fire={per_fire:.2f} store_us_per_fire={store_us:.0f} daemon_us_per_fire={daemon_cpu * 1e6 / fires:.0f} "
          f"rss_mb={rss_mb:.1f} burst_p99_ms={percentile(burst, 0.99) if burst else -1:.0f} "
          f"start_ms={started_ms:.0f} validate_ms={args.validate_ms} reload_ms={args.reload_ms} duplicates={duplicates} "
          f"missing={len(missing)}")
    return 1 if duplicates or missing or not burst or len(burst) < args.burst else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["start-cost", "report"])
    for name in ["work", "backend", "mode"]:
        parser.add_argument(f"--{name}")
    for name in ["replicas", "jobs", "every", "burst", "burst-at", "window-start", "window", "validate-ms",
                 "reload-ms", "clock-ticks"]:
        parser.add_argument(f"--{name}", type=int)
    parser.add_argument("--start-cost-ms", type=float)
    args = parser.parse_args()
    if args.what == "start-cost":
        start_cost()
        return 0
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
