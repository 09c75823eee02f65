"""Retries, against a tiny local HTTP server that answers like a busy ptd
(the one behaviour a real ptd cannot be made to show on demand)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from platinum import AsyncPlatinum, CapacityError, Platinum, QuotaExceededError


class Busy:
    """Answers each request with the next scripted (status, headers, body),
    repeating the last; records (time, method, path, headers) per request."""

    def __init__(self, script: list[tuple[int, dict[str, str], dict[str, Any]]]) -> None:
        self.script = script
        self.seen: list[tuple[float, str, str, dict[str, str]]] = []
        busy = self

        class H(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                busy.seen.append((time.monotonic(), self.command, self.path, dict(self.headers)))
                status, hdrs, body = busy.script[min(len(busy.seen), len(busy.script)) - 1]
                raw = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **hdrs}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *a: Any) -> None:
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


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
