"""The client's retry and wait logic against a tiny local HTTP server that
answers from a script (503s with Retry-After, 202 wait_timed_out, states
that never settle), so each rule is checked exactly: which requests go out,
with which keys, and when. The same behaviour against a real ptd is in
test_admission.py (a start refused by the start admission queue) and
test_sandboxes.py (a create whose server-side wait ran out)."""

from __future__ import annotations

import json
import re
import time
from typing import Any, AsyncIterator, Iterator

import httpx
import pytest

import random
from platinum import AsyncPlatinum, CapacityError, Platinum, QuotaExceededError, WaitTimeoutError
from platinum._core import Core
from platinum._errors import error_from_response

from conftest import LocalServer, QuietHandler


class Busy(LocalServer):
    """Answers each request with the next scripted (status, headers, body),
    repeating the last; records (time, method, path, headers) per request."""

    def __init__(self, script: list[tuple[int, dict[str, str], dict[str, Any]]]) -> None:
        self.script = script
        self.seen: list[tuple[float, str, str, dict[str, str]]] = []
        self.bodies: list[bytes] = []
        busy = self

        class H(QuietHandler):
            def _answer(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                got = self.rfile.read(n)
                if self.headers.get("Transfer-Encoding") == "chunked":
                    got = self._chunked()
                busy.seen.append((time.monotonic(), self.command, self.path, dict(self.headers)))
                busy.bodies.append(got)
                status, hdrs, body = busy.script[min(len(busy.seen), len(busy.script)) - 1]
                raw = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **hdrs}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _chunked(self) -> bytes:
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _answer

        super().__init__(H)


CAPACITY = (503, {"Retry-After": "1"}, {"code": "capacity", "error": "the host is busy; call again",
                                        "reason": "start_queue_full", "queued_ms": 0})
RUNNING = {"id": "sbx_01KA0000000000000000000000", "state": "running"}


@pytest.fixture
def busy() -> Iterator[Busy]:
    holder: list[Busy] = []

    def make(script: list[tuple[int, dict[str, str], dict[str, Any]]]) -> Busy:
        b = Busy(script)
        holder.append(b)
        return b

    yield make  # type: ignore[misc]
    for b in holder:
        b.close()


def test_capacity_503_is_retried_after_retry_after(busy: Any) -> None:
    srv: Busy = busy([CAPACITY, (200, {}, RUNNING)])
    with Platinum(token="t", api_url=srv.url) as c:
        sbx = c.sandboxes.create(template="busybox")
    assert sbx.id == RUNNING["id"]
    assert [s[1] for s in srv.seen] == ["POST", "POST"]
    keys = [s[3].get("Idempotency-Key") for s in srv.seen]
    assert keys[0] and keys[0] == keys[1], "a retry must reuse the idempotency key"
    assert srv.seen[1][0] - srv.seen[0][0] >= 1.0, "the retry came before Retry-After"


def test_capacity_retries_are_bounded(busy: Any) -> None:
    srv: Busy = busy([(503, {"Retry-After": "0"}, CAPACITY[2])])
    with Platinum(token="t", api_url=srv.url, max_retries=2) as c:
        with pytest.raises(CapacityError) as e:
            c.sandboxes.create(template="busybox")
    assert len(srv.seen) == 3
    assert (e.value.code, e.value.status, e.value.reason, e.value.queued_ms) == ("capacity", 503, "start_queue_full", 0)
    assert e.value.retry_after == 0


def test_quota_exceeded_is_not_retried(busy: Any) -> None:
    srv: Busy = busy([(429, {}, {"code": "quota_exceeded", "error": "over max_sandboxes", "limit": "max_sandboxes",
                                 "max": 1, "scope": "org"})])
    with Platinum(token="t", api_url=srv.url) as c:
        with pytest.raises(QuotaExceededError) as e:
            c.sandboxes.create(template="busybox")
    assert len(srv.seen) == 1
    assert (e.value.limit, e.value.max, e.value.scope) == ("max_sandboxes", 1, "org")


def test_rate_limited_429_is_retried(busy: Any) -> None:
    srv: Busy = busy([(429, {"Retry-After": "0"}, {"code": "rate_limited", "error": "slow down"}), (200, {}, RUNNING)])
    with Platinum(token="t", api_url=srv.url) as c:
        assert c.sandboxes.get(RUNNING["id"]).state == "running"
    assert len(srv.seen) == 2


def test_no_key_means_no_retry_for_a_mutation(busy: Any) -> None:
    srv: Busy = busy([CAPACITY, (200, {}, RUNNING)])
    with Platinum(token="t", api_url=srv.url, idempotency_keys=False) as c:
        with pytest.raises(CapacityError):
            c.sandboxes.create(template="busybox")
    assert len(srv.seen) == 1 and "Idempotency-Key" not in srv.seen[0][3]


@pytest.mark.asyncio
async def test_async_capacity_503_is_retried(busy: Any) -> None:
    srv: Busy = busy([CAPACITY, (200, {}, RUNNING)])
    async with AsyncPlatinum(token="t", api_url=srv.url) as c:
        sbx = await c.sandboxes.create(template="busybox")
    assert sbx.state == "running" and len(srv.seen) == 2
    assert srv.seen[0][3]["Idempotency-Key"] == srv.seen[1][3]["Idempotency-Key"]


def test_token_and_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, busy: Any) -> None:
    srv: Busy = busy([(200, {}, RUNNING)])
    monkeypatch.setenv("PT_TOKEN", "from-env")
    monkeypatch.setenv("PT_API_URL", srv.url)
    with Platinum() as c:
        c.sandboxes.get(RUNNING["id"])
    assert srv.seen[0][3]["Authorization"] == "Bearer from-env"


SBX = "sbx_01KA0000000000000000000000"


def test_streamed_upload_sends_a_key_and_is_sent_once(busy: Any) -> None:
    # ptd spools a keyed upload to hash it, so a streamed body carries a key
    # like any other mutation; the client cannot resend a body it has read,
    # so a "try again" answer is the caller's to handle.
    srv: Busy = busy([(200, {}, {"id": SBX, "state": "running"}), (200, {}, {"path": "/tmp/a", "size": 6}),
                      CAPACITY])
    with Platinum(token="t", api_url=srv.url) as c:
        sbx = c.sandboxes.connect(SBX)
        sbx.files.write("/tmp/a", iter([b"abc", b"def"]))
        with pytest.raises(CapacityError):
            sbx.files.write("/tmp/a", iter([b"abc", b"def"]))
    puts = [s for s in srv.seen if s[1] == "PUT"]
    assert len(puts) == 2, "the refused streamed upload was not sent again"
    keys = [s[3].get("Idempotency-Key") for s in puts]
    assert all(k and k.startswith("ptk_") for k in keys) and keys[0] != keys[1], keys
    assert all(s[3].get("Transfer-Encoding") == "chunked" for s in puts), "the body was streamed"
    assert srv.bodies[1:] == [b"abcdef", b"abcdef"]


@pytest.mark.asyncio
async def test_async_streamed_upload_sends_a_key(busy: Any) -> None:
    srv: Busy = busy([(200, {}, {"id": SBX, "state": "running"}), (200, {}, {"path": "/tmp/a", "size": 6})])

    async def chunks() -> AsyncIterator[bytes]:
        yield b"abc"
        yield b"def"

    async with AsyncPlatinum(token="t", api_url=srv.url) as c:
        sbx = await c.sandboxes.connect(SBX)
        await sbx.files.write("/tmp/a", chunks())
    put = srv.seen[1]
    assert put[1] == "PUT" and str(put[3].get("Idempotency-Key", "")).startswith("ptk_")
    assert srv.bodies[1] == b"abcdef"


def _lifecycle_script(mid: str, final: str, start_state: str) -> list[tuple[int, dict[str, str], dict[str, Any]]]:
    return [
        (200, {}, {"id": SBX, "state": start_state}),  # connect
        (202, {"Retry-After": "5"}, {"id": SBX, "state": mid, "wait_timed_out": True}),
        (200, {}, {"id": SBX, "state": mid}),
        (200, {}, {"id": SBX, "state": final}),
    ]


@pytest.mark.parametrize("verb,kw,mid,final,before", [
    ("start", "wait_for_running", "starting", "running", "stopped"),
    ("stop", "wait_for_stopped", "stopping", "stopped", "running"),
])
def test_202_wait_timed_out_polls_the_same_sandbox(busy: Any, verb: str, kw: str, mid: str, final: str,
                                                    before: str) -> None:
    srv: Busy = busy(_lifecycle_script(mid, final, before))
    with Platinum(token="t", api_url=srv.url, poll_interval=0.05) as c:
        sbx = c.sandboxes.connect(SBX)
        getattr(sbx, verb)(**{kw: True}, timeout=30)
    assert sbx.state == final
    calls = [(s[1], s[2].split("?")[0]) for s in srv.seen]
    assert calls == [("GET", f"/v1/sandboxes/{SBX}"), ("POST", f"/v1/sandboxes/{SBX}/{verb}"),
                     ("GET", f"/v1/sandboxes/{SBX}"), ("GET", f"/v1/sandboxes/{SBX}")], \
        "one POST, then polls of the same id"
    assert f"wait_for_state={final}" in srv.seen[1][2]


@pytest.mark.asyncio
async def test_async_202_wait_timed_out_polls_the_same_sandbox(busy: Any) -> None:
    srv: Busy = busy(_lifecycle_script("starting", "running", "stopped"))
    async with AsyncPlatinum(token="t", api_url=srv.url, poll_interval=0.05) as c:
        sbx = await c.sandboxes.connect(SBX)
        await sbx.start(wait_for_running=True, timeout=30)
    assert sbx.state == "running"
    assert [s[1] for s in srv.seen] == ["GET", "POST", "GET", "GET"]


def test_create_202_polls_and_never_creates_again(busy: Any) -> None:
    srv: Busy = busy([
        (202, {"Retry-After": "5"}, {"id": SBX, "state": "creating", "wait_timed_out": True}),
        (200, {}, {"id": SBX, "state": "creating"}),
        (200, {}, RUNNING | {"id": SBX}),
    ])
    with Platinum(token="t", api_url=srv.url, poll_interval=0.05) as c:
        sbx = c.sandboxes.create(template="busybox", wait_for_running=True, timeout=30)
    assert (sbx.id, sbx.state) == (SBX, "running")
    assert [(s[1], s[2].split("?")[0]) for s in srv.seen] == [
        ("POST", "/v1/sandboxes"), ("GET", f"/v1/sandboxes/{SBX}"), ("GET", f"/v1/sandboxes/{SBX}")]


@pytest.mark.parametrize("call", ["create", "start", "stop"])
def test_timeout_ends_the_polling(busy: Any, call: str) -> None:
    # The server's wait ran out (202) and the sandbox never gets there: the
    # call's timeout= ends the polling with WaitTimeoutError, whose sandbox
    # is the record as last seen; nothing is sent again.
    mid = {"create": "creating", "start": "starting", "stop": "stopping"}[call]
    script: list[tuple[int, dict[str, str], dict[str, Any]]] = [
        (202, {"Retry-After": "5"}, {"id": SBX, "state": mid, "wait_timed_out": True}),
        (200, {}, {"id": SBX, "state": mid}),
    ]
    if call != "create":
        script.insert(0, (200, {}, {"id": SBX, "state": "stopped" if call == "start" else "running"}))
    srv: Busy = busy(script)
    with Platinum(token="t", api_url=srv.url, poll_interval=0.05) as c:
        sbx = c.sandboxes.connect(SBX) if call != "create" else None
        t0 = time.monotonic()
        with pytest.raises(WaitTimeoutError) as e:
            if call == "create":
                c.sandboxes.create(template="busybox", wait_for_running=True, timeout=1.0)
            elif call == "start":
                assert sbx is not None
                sbx.start(wait_for_running=True, timeout=1.0)
            else:
                assert sbx is not None
                sbx.stop(wait_for_stopped=True, timeout=1.0)
        took = time.monotonic() - t0
    assert 1.0 <= took < 3.0, took
    assert e.value.sandbox is not None and e.value.sandbox["state"] == mid
    assert [s[1] for s in srv.seen].count("POST") == 1
    assert len(srv.seen) > 5, "it polled until the deadline"
    post = next(s[2] for s in srv.seen if s[1] == "POST")
    m = re.search(r"wait_timeout_ms=(\d+)", post)
    assert m and 900 <= int(m.group(1)) <= 1000, f"the server's wait is what is left of timeout=: {post}"


def _core() -> Core:
    return Core(token="t", api_url="http://127.0.0.1:1", timeout=10, max_retries=3, poll_interval=1,
                idempotency_keys=True, user_agent=None)


def test_backoff_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _core()
    # Without Retry-After: exponential from 0.25 s, capped at 8 s, with
    # jitter drawing from the upper half of each step.
    caps = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    for pick, frac in ((lambda a, b: a, 0.5), (lambda a, b: b, 1.0)):
        monkeypatch.setattr(random, "uniform", pick)
        assert [c.backoff(i, None) for i in range(len(caps))] == [frac * x for x in caps]
    monkeypatch.undo()
    for attempt, cap in enumerate(caps):
        draws = [c.backoff(attempt, None) for _ in range(400)]
        assert all(cap / 2 <= d <= cap for d in draws), (attempt, min(draws), max(draws))
        assert max(draws) - min(draws) > cap / 4, "no jitter"
    # With Retry-After (header, or retry_after_ms in the body): at least
    # that, plus at most 10 % + 50 ms so clients refused together spread out.
    for headers, body, want in (({"Retry-After": "5"}, {}, 5.0), ({}, {"retry_after_ms": 1500}, 1.5),
                                ({"Retry-After": "0"}, {}, 0.0)):
        err = error_from_response(503, httpx.Headers(headers), json.dumps({"code": "capacity", "error": "busy", **body}).encode())
        draws = [c.backoff(attempt, err) for attempt in range(4) for _ in range(100)]
        assert all(want <= d <= want * 1.1 + 0.05 for d in draws), (want, min(draws), max(draws))


def test_retries_never_sleep_past_the_deadline(busy: Any) -> None:
    # Retry-After 5 s does not fit a 1 s call: it fails at once, after one
    # request, rather than sleeping past its timeout.
    srv: Busy = busy([(503, {"Retry-After": "5"}, CAPACITY[2])])
    with Platinum(token="t", api_url=srv.url) as c:
        t0 = time.monotonic()
        with pytest.raises(CapacityError):
            c.sandboxes.get(SBX, timeout=1.0)
        assert time.monotonic() - t0 < 1.0
    assert len(srv.seen) == 1


def test_create_sends_region(busy: Any) -> None:
    # The create body carries region as given (docs/sandboxes.md); the
    # server routes it to that region or refuses it as unknown_region.
    srv: Busy = busy([(201, {}, {**RUNNING, "region": "eu"})])
    with Platinum(token="t", api_url=srv.url) as c:
        c.sandboxes.create(template="busybox", region="eu")
    assert json.loads(srv.bodies[0]) == {"template": "busybox", "region": "eu"}
