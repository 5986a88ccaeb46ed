"""Fifty people open the dashboard at once: every page answers, and the next one too (issue 14).

Against `make run`'s stack (daphne, SQLite, a private worker and beat). Pages never wait on a
Celery ping or a channel-layer round-trip: a worker measures health, pages read the record.
"""

import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from tests.browser.test_dashboard import sign_in

CLIENTS = 50


def load(url: str, cookie: str) -> tuple[int, float, bool]:
    started = time.monotonic()
    request = urllib.request.Request(url, headers={"Cookie": cookie})  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback test server)
        body = response.read()
        return response.status, time.monotonic() - started, b'id="health"' in body


def test_fifty_concurrent_home_pages_all_answer_and_the_next_one_too(page, stack):
    sign_in(page, stack, stack.password)
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    with ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(lambda _: load(stack.url + "/", cookie), range(CLIENTS)))
    assert all(status == 200 and whole for status, _, whole in results), results
    slowest = max(seconds for _, seconds, _ in results)
    assert slowest < 20, f"slowest page took {slowest:.1f} s"
    status, seconds, whole = load(stack.url + "/", cookie)
    assert status == 200 and whole and seconds < 5
