"""What both runners do around one httpx call, written once: build the
request a :class:`Req` describes, wrap the answer as a :class:`Reply`,
and name a transport failure. Only sending (blocking or awaited) is left
to _sync.py and _async.py."""

from __future__ import annotations

from typing import Generic, TypeVar

import httpx

from ._core import Core, Reply, Req
from ._errors import APIConnectionError, APITimeoutError, PlatinumError

C = TypeVar("C", httpx.Client, httpx.AsyncClient)


class BaseRunner(Generic[C]):
    """The state and the I/O-free half of a runner: its core and its
    httpx client (``httpx.Client`` or ``httpx.AsyncClient``)."""

    def __init__(self, core: Core, http: C) -> None:
        self.core = core
        self.http: C = http

    def _request(self, r: Req) -> httpx.Request:
        return self.http.build_request(
            r.method, self.core.api_url + r.path, params=httpx.QueryParams(tuple(r.params)) if r.params else None, headers=r.headers,
            json=r.json if r.has_json else None, content=r.content,
            timeout=httpx.Timeout(r.timeout, read=r.read_timeout))


def reply(r: Req, resp: httpx.Response) -> Reply:
    """The answer to r: its body read, or, for a streamed request, the
    response itself (Reply.raw) for the operation to read and close."""
    if r.stream:
        return Reply(resp.status_code, resp.headers, b"", resp)
    return Reply(resp.status_code, resp.headers, resp.content)


def transport_error(r: Req, e: httpx.TransportError) -> PlatinumError:
    """The error a failed send of r is thrown into its operation as."""
    if isinstance(e, httpx.TimeoutException):
        return APITimeoutError(f"{r.method} {r.path}: timed out ({e})")
    return APIConnectionError(f"{r.method} {r.path}: {e or type(e).__name__}")
