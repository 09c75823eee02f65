"""A start refused by ptd's start admission queue, end to end.

These tests need a ptd whose host starts one sandbox at a time and queues
none (``--start-admission-slots 1 --start-admission-slots-saturated 1
--start-admission-max-queue 0``): tests/sdk/python TestStartAdmission
starts one and runs ``pytest -m admission`` against it with
PT_SDK_ADMISSION=1; the main suite deselects them. A start that arrives
while another is in flight is then answered 503 capacity, reason
start_queue_full, Retry-After: 5, the sandbox left stopped.

The slot is held by the start of an archived sandbox: it restores the disk
from the object store and cold boots, which takes a second or more, while
the calls under test reach ptd a few milliseconds after it began.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Callable

import httpx
import pytest

from platinum import AsyncPlatinum, CapacityError, Platinum, Sandbox

from conftest import need_ptd

pytestmark = pytest.mark.admission

Track = Callable[[str], None]


@pytest.fixture(autouse=True)
def admission_ptd() -> None:
    need_ptd()
    if os.environ.get("PT_SDK_ADMISSION") != "1":
        pytest.skip("needs a ptd with one start slot and no start queue (go test -run TestStartAdmission "
                    "./tests/sdk/python starts one)")


class Sent:
    """What a client sent and got back: (send time, method, path, key,
    status, code, Retry-After) per request."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, str, str, str | None, int, str | None, str | None]] = []
        self.sent: dict[int, float] = {}
        self.lock = threading.Lock()

    def on_request(self, r: httpx.Request) -> None:
        with self.lock:
            self.sent[id(r)] = time.monotonic()

    def on_response(self, resp: httpx.Response) -> None:
        code = None
        if resp.status_code >= 400:
            resp.read()
            code = json.loads(resp.content).get("code")
        self.record(resp, code)

    async def aon_request(self, r: httpx.Request) -> None:
        self.on_request(r)

    async def aon_response(self, resp: httpx.Response) -> None:
        code = None
        if resp.status_code >= 400:
            await resp.aread()
            code = json.loads(resp.content).get("code")
        self.record(resp, code)

    def record(self, resp: httpx.Response, code: str | None) -> None:
        r = resp.request
        with self.lock:
            self.rows.append((self.sent.pop(id(r)), r.method, r.url.path, r.headers.get("Idempotency-Key"),
                              resp.status_code, code, resp.headers.get("Retry-After")))

    def starts(self, sandbox_id: str) -> list[tuple[float, str, str, str | None, int, str | None, str | None]]:
        return [s for s in self.rows if s[1] == "POST" and s[2] == f"/v1/sandboxes/{sandbox_id}/start"]


def archived(client: Platinum, track: Track) -> Sandbox:
    """A stopped and archived sandbox: starting it restores its disk,
    holding the host's one start slot meanwhile."""
    s = client.sandboxes.create(template="busybox", wait_for_running=True, timeout=300)
    track(s.id)
    s.stop(wait_for_stopped=True, timeout=120)
    s.archive(wait_for_archived=True, timeout=300)
    assert s.state == "archived"
    return s


def stopped(client: Platinum, track: Track) -> Sandbox:
    s = client.sandboxes.create(template="busybox", wait_for_running=True, timeout=300)
    track(s.id)
    s.stop(wait_for_stopped=True, timeout=120)
    return s


def check_retried(sent: Sent, sandbox_id: str) -> None:
    """The start was refused with a real 503 capacity, sent again after
    Retry-After with the same key, and finally admitted."""
    starts = sent.starts(sandbox_id)
    assert len(starts) >= 2, starts
    first, last = starts[0], starts[-1]
    assert (first[4], first[5], first[6]) == (503, "capacity", "5"), "ptd refused the first start"
    assert last[4] == 200, "the last attempt was admitted"
    assert all((s[4], s[5]) == (503, "capacity") for s in starts[:-1]), "only capacity refusals were retried"
    assert first[3] and all(s[3] == first[3] for s in starts), "every attempt carries the first one's key"
    for a, b in zip(starts, starts[1:]):
        gap = b[0] - a[0]
        # Retry-After: 5, plus the client's jitter (at most 10 % and 50 ms).
        assert 5.0 <= gap < 5.55 + 1.0, f"an attempt came {gap:.3f} s after the one before (Retry-After: 5)"


def test_start_refused_with_capacity_is_retried_after_retry_after(client: Platinum, track: Track) -> None:
    holder = archived(client, track)
    target = stopped(client, track)
    sent = Sent()
    http = httpx.Client(event_hooks={"request": [sent.on_request], "response": [sent.on_response]})
    with Platinum(max_retries=0) as once, Platinum(http_client=http) as retrying:
        refused = once.sandboxes.connect(target.id)
        again = retrying.sandboxes.connect(target.id)

        # The holder's start returns at once (restoring) and keeps the host's
        # only start slot until its restore and boot are done.
        holder.start()
        assert holder.state == "restoring"

        # Both starts reach ptd while the slot is held. Without retries the
        # refusal reaches the caller, typed; with the default retries the
        # client waits Retry-After and sends the same start again.
        result: list[BaseException | None] = []

        def retried() -> None:
            try:
                again.start(wait_for_running=True, timeout=120)
                result.append(None)
            except BaseException as e:  # noqa: BLE001 - reported below
                result.append(e)

        th = threading.Thread(target=retried)
        th.start()
        with pytest.raises(CapacityError) as e:
            refused.start(wait_for_running=True, timeout=120)
        assert (e.value.code, e.value.status, e.value.reason, e.value.retry_after) == \
            ("capacity", 503, "start_queue_full", 5.0)
        assert client.sandboxes.get(target.id).state == "stopped", "a refused start leaves the sandbox stopped"
        th.join(timeout=180)
        assert result == [None], result
        assert again.state == "running"
    http.close()
    check_retried(sent, target.id)
    holder.wait_for_state("running", timeout=300)
    assert holder.exec(["true"]).exit_code == 0


@pytest.mark.asyncio
async def test_async_start_refused_with_capacity_is_retried(client: Platinum, track: Track) -> None:
    holder = archived(client, track)
    target = stopped(client, track)
    sent = Sent()
    http = httpx.AsyncClient(event_hooks={"request": [sent.aon_request], "response": [sent.aon_response]})
    async with AsyncPlatinum(http_client=http) as c:
        again = await c.sandboxes.connect(target.id)
        await asyncio.to_thread(holder.start)
        assert holder.state == "restoring"
        await again.start(wait_for_running=True, timeout=120)
        assert again.state == "running"
    await http.aclose()
    check_retried(sent, target.id)
    holder.wait_for_state("running", timeout=300)
