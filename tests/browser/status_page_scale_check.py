"""The status page of a fleet of 100,000 jobs, in headless Chromium.

Usage: status_page_scale_check.py DRIVER_URL CHROMIUM PAGE_URL TOTAL

The page shows a page of 100 jobs (not all of them), says how many the
fleet has, finds jobs by key prefix and turns pages; each answer is one
page of the API's (docs/api.md#paging-and-filters).
"""
import sys
import time

from webdriver import Session

driver_url, chromium, page_url, total = sys.argv[1:5]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


STATE = """
return {keys: [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => r.dataset.job),
        count: document.getElementById('job-count').textContent,
        total: document.getElementById('job-count').dataset.total || ''};
"""

session = Session(driver_url, chromium, 1280, 1000)
try:
    started = time.monotonic()
    session.open(page_url)
    first = session.wait("the first page of jobs", lambda: (
        lambda s: s if len(s["keys"]) == 100 and s["total"] == total else None)(session.script(STATE)), seconds=60)
    print(f"first page shown {time.monotonic() - started:.2f} s after opening the page")
    check(first["keys"] == [f"customer-{i:06}" for i in range(100)], f"the first 100 jobs, by key: {first['keys'][:3]}…")
    check(first["count"].startswith(f"{total} job(s), showing 100"), f"the count: {first['count']!r}")
    session.click("#page-next")
    second = session.wait("the second page", lambda: (
        lambda s: s if s["keys"][:1] == ["customer-000100"] else None)(session.script(STATE)))
    check(len(second["keys"]) == 100 and "(page 2)" in second["count"], f"the second page: {second['count']!r}")
    started = time.monotonic()
    session.type("#job-search", "customer-04217")
    found = session.wait("the jobs starting with customer-04217", lambda: (
        lambda s: s if s["keys"] == [f"customer-04217{i}" for i in range(10)] else None)(session.script(STATE)))
    print(f"search answered in {time.monotonic() - started:.2f} s")
    check(found["count"].startswith('10 job(s) starting with "customer-04217"'), f"the search's count: {found['count']!r}")
finally:
    session.close()

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("all status page scale checks passed")
