"""The transport-free core shared by the sync and the async client.

Every API call is written once, as a generator (an *operation*) that yields
steps — send this request, sleep this long, read this streamed body — and
receives their results. The sync client runs operations with blocking I/O,
the async client with ``await``; neither holds any API logic of its own, so
retries, idempotency keys, waits and pagination behave the same in both.
"""

from __future__ import annotations

import json as _json
import os
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Generator, Mapping, TypeVar
from urllib.parse import quote

from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    PlatinumError,
    StreamEndedError,
    error_from_response,
)

T = TypeVar("T")

VERSION = "0.1.0"
DEFAULT_API_URL = "http://127.0.0.1:7070"
IDEMPOTENCY_HEADER = "Idempotency-Key"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The longest server-side wait ptd accepts (wait_timeout_ms).
MAX_SERVER_WAIT = 600.0
# ptd's own wait when the call names none.
DEFAULT_SERVER_WAIT = 60.0
# How long past a server-side wait a request may take to answer.
WAIT_GRACE = 30.0


@dataclass
class Req:
    """Send one HTTP request. The runner answers with a :class:`Reply`, or
    throws APIConnectionError / APITimeoutError into the operation."""

    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    json: Any = None
    has_json: bool = False
    # bytes, or an (async) iterable of bytes passed to httpx unread.
    content: Any = None
    timeout: float | None = None
    # Read timeout (between bytes); None waits as long as the body takes.
    read_timeout: float | None = None
    # Return the response unread (Reply.raw), for downloads and streams.
    stream: bool = False


@dataclass
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes = b""
    # The open httpx.Response of a streamed request; the caller closes it.
    raw: Any = None


@dataclass
class Sleep:
    seconds: float


@dataclass
class ReadBody:
    """Read a streamed reply's body (at most ``limit`` bytes) and close it;
    the runner answers with the bytes."""

    reply: Reply
    limit: int | None = 64 << 10


@dataclass
class Close:
    """Close a streamed reply unread."""

    reply: Reply


Step = Req | Sleep | ReadBody | Close
# An http_timeout that never runs out: streams and long commands may be
# silent for as long as they like.
FOREVER = float("inf")
Op = Generator[Step, Any, T]


class Deadline:
    """When a call must be over: ``timeout`` seconds from now, or never."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.at = None if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        if self.at is None:
            return None
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def cap(self, seconds: float) -> float:
        """seconds, shortened to what is left."""
        r = self.remaining()
        return seconds if r is None else min(seconds, r)


def new_idempotency_key() -> str:
    """A fresh random idempotency key, as the client generates."""
    return "ptk_" + secrets.token_hex(16)


def seg(s: str) -> str:
    """One URL path segment."""
    return quote(str(s), safe="")


def retryable(err: APIError) -> bool:
    """Whether the same request may work if sent again."""
    if err.status in (502, 503, 504):
        return True
    if err.code == "idempotency_key_in_progress":
        return True
    # A quota refusal stays until something is deleted: retrying only delays
    # the answer. Other 429s (a rate limiter in front of ptd) are transient.
    return err.status == 429 and err.code != "quota_exceeded"


class Core:
    """Configuration and the request step every operation goes through."""

    def __init__(
        self,
        *,
        token: str | None,
        api_url: str | None,
        timeout: float,
        max_retries: int,
        poll_interval: float,
        idempotency_keys: bool,
        user_agent: str | None,
    ) -> None:
        token = token if token is not None else os.environ.get("PT_TOKEN")
        if not token:
            raise PlatinumError("no token: pass token= or set PT_TOKEN")
        base = api_url if api_url is not None else os.environ.get("PT_API_URL") or DEFAULT_API_URL
        if not (base.startswith("http://") or base.startswith("https://")):
            raise PlatinumError(f"api_url {base!r}: want an http:// or https:// URL such as {DEFAULT_API_URL}")
        if max_retries < 0 or timeout <= 0 or poll_interval <= 0:
            raise PlatinumError("max_retries must be >= 0, timeout and poll_interval > 0")
        self.api_url = base.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self.poll_interval = poll_interval
        self.idempotency_keys = idempotency_keys
        self.user_agent = user_agent or f"platinum-python/{VERSION}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "User-Agent": self.user_agent}

    def backoff(self, attempt: int, err: APIError | None) -> float:
        """Delay before retry number attempt+1: Retry-After when the server
        sent one (plus a little jitter, so many clients do not return in
        step), else exponential with full jitter."""
        if err is not None:
            hinted = err.retry_after
            ms = err.body.get("retry_after_ms")
            if hinted is None and isinstance(ms, (int, float)):
                hinted = float(ms) / 1000
            if hinted is not None:
                return float(hinted) + random.uniform(0, 0.1 * hinted + 0.05)
        return random.uniform(0.5, 1.0) * min(8.0, 0.25 * 2.0**attempt)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: list[tuple[str, str]] | None = None,
        json: Any = None,
        has_json: bool = False,
        content: Any = None,
        headers: Mapping[str, str] | None = None,
        deadline: Deadline | None = None,
        http_timeout: float | None = None,
        idempotency_key: str | None = None,
        stream: bool = False,
        rewindable: bool = True,
    ) -> Op[Reply]:
        """Sends a request and returns its 2xx reply, raising APIError for
        any other. A mutating request carries an idempotency key (the one
        given, else a fresh one), a one-shot streamed body too: ptd spools a
        keyed upload to hash it, so a resend of the whole upload with the
        same key (after a crash, say) gets the first answer. Reads and keyed
        requests are retried on answers that say "try again", with the same
        key; a one-shot streamed body is never sent twice."""
        dl = deadline or Deadline(None)
        hdrs = self.headers()
        if has_json:
            hdrs["Content-Type"] = "application/json"
        hdrs.setdefault("Accept", "application/json")
        hdrs.update(headers or {})
        mutating = method in MUTATING
        if mutating and idempotency_key:
            hdrs[IDEMPOTENCY_HEADER] = idempotency_key
        elif mutating and self.idempotency_keys:
            hdrs[IDEMPOTENCY_HEADER] = new_idempotency_key()
        can_retry = rewindable and (not mutating or IDEMPOTENCY_HEADER in hdrs)
        base = http_timeout if http_timeout is not None else self.timeout
        attempt = 0
        while True:
            read = max(dl.cap(base), 0.001)
            req = Req(method, path, list(params or []), dict(hdrs), json, has_json, content,
                      timeout=min(self.timeout, read), read_timeout=None if read == FOREVER else read,
                      stream=stream)
            try:
                reply: Reply = yield req
            except (APIConnectionError, APITimeoutError):
                if not can_retry or attempt >= self.max_retries or dl.expired():
                    raise
                delay = self.backoff(attempt, None)
                if dl.remaining() is not None and delay >= (dl.remaining() or 0):
                    raise
                yield Sleep(delay)
                attempt += 1
                continue
            if 200 <= reply.status < 300:
                return reply
            raw = (yield ReadBody(reply)) if stream else reply.body
            err = error_from_response(reply.status, reply.headers, raw)
            if can_retry and attempt < self.max_retries and retryable(err):
                delay = self.backoff(attempt, err)
                r = dl.remaining()
                if r is None or delay < r:
                    yield Sleep(delay)
                    attempt += 1
                    continue
            raise err

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: list[tuple[str, str]] | None = None,
        deadline: Deadline | None = None,
        http_timeout: float | None = None,
        idempotency_key: str | None = None,
    ) -> Op[Any]:
        """A JSON request (body None sends none) decoded into Python values
        (None for an empty answer)."""
        reply = yield from self.request(
            method, path, params=params, json=body, has_json=body is not None, deadline=deadline,
            http_timeout=http_timeout, idempotency_key=idempotency_key)
        return decode(reply)


def decode(reply: Reply) -> Any:
    if reply.status == 204 or not reply.body:
        return None
    try:
        return _json.loads(reply.body)
    except ValueError as e:
        raise PlatinumError(f"HTTP {reply.status}: the answer is not JSON: {reply.body[:200]!r}") from e


def ndjson_object(line: str, what: str) -> dict[str, Any] | None:
    """One line of an NDJSON stream as the object it holds (None for a blank
    line). Exec output and code cells both stream this way; a line that is
    not a JSON object means the stream is broken, so it raises
    StreamEndedError naming ``what`` was expected."""
    line = line.strip()
    if not line:
        return None
    try:
        d = _json.loads(line)
    except ValueError as e:
        raise StreamEndedError(f"bad {what} {line[:200]!r}") from e
    if not isinstance(d, dict):
        raise StreamEndedError(f"bad {what} {line[:200]!r}")
    return d


def want_dict(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise PlatinumError(f"unexpected answer: {v!r:.200}")
    return v


def bool_param(v: bool) -> str:
    return "true" if v else "false"
