"""Fixtures for the suite. Tests that need a ptd read PT_API_URL and
PT_TOKEN (tests/sdk/python starts one and sets them); without them they
skip, or fail where PT_SDK_TESTS_REQUIRE_PTD=1 or CI=true."""

from __future__ import annotations

import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio

from platinum import AsyncPlatinum, NotFoundError, Platinum, Sandbox

REQUIRE = os.environ.get("PT_SDK_TESTS_REQUIRE_PTD") == "1" or os.environ.get("CI") == "true"


def need_ptd() -> None:
    if not (os.environ.get("PT_API_URL") and os.environ.get("PT_TOKEN")):
        if REQUIRE:
            pytest.fail("PT_API_URL and PT_TOKEN must point at a ptd")
        pytest.skip("needs a ptd: set PT_API_URL and PT_TOKEN (go test ./tests/sdk/python does)")


@pytest.fixture
def client() -> Iterator[Platinum]:
    need_ptd()
    with Platinum(poll_interval=0.2) as c:
        yield c


@pytest_asyncio.fixture
async def aclient() -> AsyncIterator[AsyncPlatinum]:
    need_ptd()
    async with AsyncPlatinum(poll_interval=0.2) as c:
        yield c


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that does not log every request to stderr, which
    would bury pytest's own output."""

    def log_message(self, *a: Any) -> None:
        pass


class LocalServer:
    """An HTTP server on a free loopback port, serving ``handler`` from a
    daemon thread until close(); the test points a client at ``url``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def tag() -> str:
    """A metadata value unique to one test, to list only its sandboxes."""
    return "t" + secrets.token_hex(4)


@pytest.fixture
def track(client: Platinum) -> Iterator[Callable[[str], None]]:
    """Registers sandbox ids to delete when the test ends, newest first (so
    children go before their parents), whether it passed or not."""
    ids: list[str] = []
    yield ids.append
    for id in reversed(ids):
        try:
            client.sandboxes.delete(id)
        except NotFoundError:
            pass


@pytest.fixture
def busybox(client: Platinum, track: Callable[[str], None]) -> Sandbox:
    """A running busybox sandbox, deleted after the test."""
    sbx = client.sandboxes.create(template="busybox", wait_for_running=True, timeout=120)
    track(sbx.id)
    return sbx
