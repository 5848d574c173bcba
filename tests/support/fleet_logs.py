#!/usr/bin/env python3
"""Reads the text logs of a fleet's daemons (replica*.log in a work
directory) for the fleet scripts' checks (tests/e2e/fleet_test.sh):

  fleet_logs.py lag DIR
      the worst scheduling lag the daemons reported (`scheduling-lag`
      lines), in whole seconds rounded up: 0 when none was reported.
  fleet_logs.py overlap DIR TOLERANCE_MS [KILLED_LOG ...]
      every fire skipped `overlap`, checked against the runs the logs show:
      a skip is true when the run it names had not been reported finished
      when the skip was logged or, for the local rule, when the replica was
      still busy with an earlier fire of the job (running it, or deciding
      it: on a busy host a fire's process starts seconds after a worker took
      it), within TOLERANCE_MS (log lines reach the file a little after the
      decision, by up to the scheduling lag). A replica SIGKILLed (its log
      named as KILLED_LOG) may have died deciding the earlier fire, leaving
      no line about it: its local skips within TOLERANCE_MS of its log's
      last line are taken as true. Prints "FIRE_KEY REPLICA_LOG SECONDS_AFTER_EPOCH" per
      true skip; exits 1 naming each false one.

Log lines: "2026-12-04T18:48:33.216Z warn  EVENT job=J fire=K message".
"""
import datetime
import glob
import math
import os
import re
import sys

LINE = re.compile(r"^(\S+Z) +(\w+) +(\S+)(?: job=(\S+))?(?: fire=(\S+))? ?(.*)$")
NAMED = re.compile(r"still goes on replica (\S+): fire (\S+), started")
LAG = re.compile(r"up to (\d+) ms late")


def seconds(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def instant(fire):
    """The scheduled instant of a fire key ("job@2026-12-04T18:48:33Z")."""
    return datetime.datetime.strptime(fire.split("@", 1)[1], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def read(directory):
    """Yields (log name, time, event, job, fire, message) of every line."""
    for path in sorted(glob.glob(os.path.join(directory, "replica*.log"))):
        name = os.path.basename(path)
        with open(path, errors="replace") as log:
            for text in log:
                match = LINE.match(text.rstrip("\n"))
                if not match or not match.group(1)[:4].isdigit():
                    continue
                try:
                    at = seconds(match.group(1))
                except ValueError:
                    continue
                yield name, at, match.group(3), match.group(4), match.group(5), match.group(6)


def lag(directory):
    worst = 0
    for _, _, event, _, _, message in read(directory):
        if event == "scheduling-lag":
            found = LAG.search(message)
            if found:
                worst = max(worst, int(found.group(1)))
    print(math.ceil(worst / 1000))
    return 0


def overlap(directory, tolerance_ms, killed_logs):
    tolerance = tolerance_ms / 1000
    last_line = {}
    # Per log and fire: when the replica was done with it (its run reported
    # finished, or the fire skipped); math.inf while a run never finished.
    done, finished, skips = {}, {}, []
    for name, at, event, job, fire, message in read(directory):
        last_line[name] = at
        if not fire or event not in ("run-started", "run-finished", "fire-skipped"):
            continue
        if event == "run-started":
            done.setdefault((name, fire), (job, math.inf))
            continue
        done[(name, fire)] = (job, at)
        if event == "run-finished":
            finished[fire] = at
        elif message.startswith("overlap"):
            skips.append((name, at, job, fire, message))
    false = 0
    for name, at, job, fire, message in skips:
        named = NAMED.search(message)
        if named:
            # The fleet-wide rule names the run the registry listed: true
            # unless that run was reported finished before the skip. (A run
            # of a replica killed before it logged anything never finishes;
            # fleet_test.sh bounds how long such a run blocks.)
            true = finished.get(named.group(2), math.inf) >= at - tolerance
        else:
            # The local rule: a fire of the job due earlier that this replica
            # was still busy with (running it, or still deciding it).
            true = any(log == name and j == job and instant(key) < instant(fire) and end >= at - tolerance
                       for (log, key), (j, end) in done.items())
            true = true or (name in killed_logs and last_line[name] <= at + tolerance)
        if true:
            print(fire, name, int(instant(fire)))
        else:
            false += 1
            print(f"false overlap skip in {name} at {at:.3f}: {fire}: {message}", file=sys.stderr)
    return 1 if false else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "lag":
        return lag(argv[2])
    if len(argv) >= 4 and argv[1] == "overlap":
        return overlap(argv[2], int(argv[3]), set(argv[4:]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
