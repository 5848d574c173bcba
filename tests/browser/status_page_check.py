"""Drives the status page of a running fleet in headless Chromium.

Usage: status_page_check.py DRIVER_URL CHROMIUM PAGE_URL JOURNAL TOKEN OUT_DIR STORE_LEADER
                            REPLICA2_JOBS_FILE REPLICA2_PID

Checks that the page shows the fleet's jobs, its three replicas and the
leader; that every run the page lists as succeeded is in the journal the
jobs write (and that recent journal entries are on the page); that the
failing job is marked as failed; then types the token, presses trigger
for a job that never fires by itself, and sees its run appear on the page
and in the journal. Times show in the job's zone with its offset; the
replica whose jobs file differs (browser-2) is named; once its file drops
the job only it ran and it reloads, that job shows removed and its
trigger is disabled; a failed run's view shows its whole output. Saves screenshots (laptop and phone) under OUT_DIR.
"""
import os
import signal
import sys
import time

from webdriver import Session

driver_url, chromium, page_url, journal_path, token, out_dir, store_leader, jobs_2, pid_2 = sys.argv[1:10]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def journal():
    with open(journal_path) as f:
        return [line.split() for line in f if line.strip()]


PAGE_STATE = """
const rows = sel => [...document.querySelectorAll(sel)];
return {
  jobs: rows('#jobs tbody tr[data-job]').map(r => ({job: r.dataset.job, bad: r.classList.contains('bad'),
        outcome: r.querySelector('.outcome').textContent, state: r.querySelector('.state').textContent,
        next: r.querySelector('.next').textContent, removed: r.classList.contains('removed'),
        trigger_disabled: r.querySelector('button[data-action="trigger"]').disabled})),
  runs: rows('#runs tbody tr[data-fire]').map(r => ({fire: r.dataset.fire, fate: r.dataset.fate,
        duration: r.children[3].textContent})),
  replicas: rows('#replicas tbody tr[data-replica]').map(r => r.dataset.replica),
  replica_jobs: Object.fromEntries(rows('#replicas tbody tr[data-replica]').map(r => [r.dataset.replica,
        r.querySelector('.jobs').textContent])),
  leader: document.getElementById('leader').dataset.holder || '',
  count: document.getElementById('job-count').textContent,
  next_enabled: !document.getElementById('page-next').disabled,
  updated: document.getElementById('updated').dataset.at || '',
  message: document.getElementById('message').textContent,
  overflow: Math.max(document.documentElement.scrollWidth - document.documentElement.clientWidth,
                     ...rows('.scroll').map(s => s.scrollWidth - s.clientWidth)),
};
"""

session = Session(driver_url, chromium, 1280, 1000)
try:
    session.open(page_url)
    state = session.wait("the jobs, three replicas and some runs on the page", lambda: (
        lambda s: s if len(s["jobs"]) >= 6 and len(s["replicas"]) == 3 and len(s["runs"]) >= 5
        and any(j["job"] == "fails" and j["bad"] for j in s["jobs"])
        and any(r["fate"] == "skipped" for r in s["runs"]) else None)(session.script(PAGE_STATE)))
    keys = sorted(j["job"] for j in state["jobs"])
    check(keys == ["busy", "extra", "fails", "manual", "tick", "tokyo"], f"the page lists the fleet's jobs: {keys}")
    tokyo = next(j for j in state["jobs"] if j["job"] == "tokyo")
    check(tokyo["next"].endswith("09:00:00 GMT+9"), f"a job's next fire in its zone, with the offset: {tokyo['next']!r}")
    check(state["replica_jobs"].get("browser-2", "").startswith("OTHER jobs")
          and state["replica_jobs"].get("browser-0") == "same" and state["replica_jobs"].get("browser-1") == "same",
          f"the replica with another jobs file is named: {state['replica_jobs']}")
    skipped = [r for r in state["runs"] if r["fate"] == "skipped"]
    check(all(r["duration"] == "—" for r in skipped), f"a skip shows no duration: {skipped[:3]}")
    timed = [r for r in state["runs"] if r["fate"] in ("succeeded", "failed")]
    check(timed and all(r["duration"] != "—" for r in timed), f"a finished run shows its duration: {timed[:3]}")
    check(len(state["replicas"]) == 3, f"three replicas: {state['replicas']}")
    check(state["leader"] == store_leader, f"the leader is the store's: page {state['leader']!r}, store {store_leader!r}")
    fails = next(j for j in state["jobs"] if j["job"] == "fails")
    check(fails["bad"] and "failed" in fails["outcome"] and "exit 3" in fails["outcome"],
          f"the failing job is marked failed: {fails}")
    ran = {entry[0] for entry in journal()}
    shown_succeeded = [r["fire"] for r in state["runs"] if r["fate"] == "succeeded"]
    check(shown_succeeded and all(fire in ran for fire in shown_succeeded),
          f"every succeeded run on the page is in the journal ({len(shown_succeeded)} shown)")
    shown = {r["fire"] for r in state["runs"]}
    newest_tick = sorted(e[0] for e in journal() if e[0].startswith("tick@"))[-8:-3]
    check(any(fire in shown for fire in newest_tick), "the journal's recent tick runs are on the page")
    check(any(r["fate"] == "failed" for r in state["runs"]), "failed runs are among the recent runs")
    check(state["overflow"] <= 0, f"no horizontal scroll at 1280 px, on the page or in a table (widest overflow {state['overflow']} px)")
    session.screenshot(f"{out_dir}/status_page.png")

    # Trigger: without the token the page asks for it; with it one replica runs the job.
    session.click('button[data-action="trigger"][data-job="manual"]')
    asked = session.wait("the page asking for the token", lambda: "API token" in session.script(PAGE_STATE)["message"])
    check(bool(asked), "trigger without a token asks for it")
    session.type("#token", token)
    session.click('button[data-action="trigger"][data-job="manual"]')
    session.wait("the trigger to be accepted", lambda: "requested" in session.script(PAGE_STATE)["message"])
    run = session.wait("the triggered run on the page", lambda: next(
        (r for r in session.script(PAGE_STATE)["runs"] if r["fire"].startswith("manual@") and r["fate"] == "succeeded"),
        None), seconds=30)
    # A failed run's whole output, from the run view (the token is typed).
    session.click('#runs tbody tr[data-fate="failed"] button[data-action="output"]')
    shown = session.wait("a failed run's output", lambda: session.script(
        "const p = document.getElementById('output'); return !p.hidden && p.dataset.state ? "
        "{state: p.dataset.state, fire: p.dataset.fire, text: document.getElementById('output-text').textContent} : null"))
    check(shown["state"] == "failed" and shown["fire"].startswith("fails@")
          and shown["text"].startswith("disk full: /var/lib/fleetcron-browser-test/") and shown["text"].endswith("report-2026-12-06.csv\n"),
          f"the run view shows a failed run's whole output: {shown['state']} {shown['fire']} {shown['text'][:60]!r}")
    manual_in_journal = [e for e in journal() if e[0].startswith("manual@")]
    check(len(manual_in_journal) == 1 and manual_in_journal[0][0] == run["fire"],
          f"the triggered run {run['fire']} ran once, as the journal says: {manual_in_journal}")
    # Pause from the page: the state column says so, for the whole fleet.
    session.click('button[data-action="pause"][data-job="tick"]')
    session.wait("tick shown paused", lambda: any(j["job"] == "tick" and "paused" in j["state"]
                                                  for j in session.script(PAGE_STATE)["jobs"]))
    check(True, "pause from the page shows the job paused")
    session.click('button[data-action="resume"][data-job="tick"]')
    session.wait("tick resumed", lambda: any(j["job"] == "tick" and "paused" not in j["state"]
                                             for j in session.script(PAGE_STATE)["jobs"]))
    # browser-2 drops "extra" and reloads: the job shows removed, no trigger.
    with open(jobs_2) as f:
        lines = f.read().splitlines()
    with open(jobs_2, "w") as f:
        f.write("\n".join(lines[:-2]) + "\n")
    os.kill(int(pid_2), signal.SIGHUP)
    after = session.wait("extra shown removed, browser-2 running the fleet's jobs", lambda: (
        lambda s: s if any(j["job"] == "extra" and j["removed"] for j in s["jobs"])
        and set(s["replica_jobs"].values()) == {"same"} else None)(session.script(PAGE_STATE)), seconds=30)
    extra = next(j for j in after["jobs"] if j["job"] == "extra")
    check("removed" in extra["state"] and extra["next"] == "—" and extra["trigger_disabled"],
          f"a job a reload removed shows removed, without a next fire or a trigger: {extra}")
    check(not any(j["removed"] for j in after["jobs"] if j["job"] != "extra"), "no other job shows removed")
    session.screenshot(f"{out_dir}/status_page_after_trigger.png")

    # Search by key prefix, filter by state, and pages (?limit=4: 6 jobs on two pages).
    def shown_keys(expected, what):
        got = session.wait(what, lambda: (lambda s: s if sorted(j["job"] for j in s["jobs"]) == expected else None)(
            session.script(PAGE_STATE)))
        return got
    session.type("#job-search", "t")
    found = shown_keys(["tick", "tokyo"], "the jobs starting with t")
    check("2 job(s) starting with \"t\"" in found["count"], f"the count says what the search found: {found['count']!r}")
    session.script("const s = document.getElementById('job-state'); s.value = 'failing'; s.dispatchEvent(new Event('change'));")
    session.script("const i = document.getElementById('job-search'); i.value = ''; i.dispatchEvent(new Event('input'));")
    shown_keys(["fails"], "the failing jobs alone")
    check(True, "the state filter shows the failing job alone")
    session.open(page_url + "?limit=4")
    first = shown_keys(["busy", "extra", "fails", "manual"], "the first page of 4")
    check(first["next_enabled"] and "6 job(s)" in first["count"], f"a page of 4 of 6, with a next page: {first['count']!r}")
    session.click("#page-next")
    second = shown_keys(["tick", "tokyo"], "the second page")
    check(not second["next_enabled"] and "(page 2)" in second["count"], f"the last page: {second['count']!r}")
    session.click("#page-prev")
    shown_keys(["busy", "extra", "fails", "manual"], "the first page again")
    check(True, "previous goes back to the first page")
    session.resize(390, 844)
    time.sleep(0.5)  # the layout of the narrow window: nothing to wait on but the resize
    session.screenshot(f"{out_dir}/status_page_phone.png")
    final = session.script(PAGE_STATE)
    print(f"page: {len(final['jobs'])} jobs, {len(final['runs'])} recent runs "
          f"({sum(r['fate'] == 'failed' for r in final['runs'])} failed), replicas {final['replicas']}, "
          f"leader {final['leader']}")
finally:
    session.close()

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("all status page checks passed")
