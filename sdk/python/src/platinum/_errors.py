"""Exceptions: one class per API error code family.

ptd answers every error with a JSON body ``{"code": ..., "error": ...}`` plus
fields some codes carry (``field``, ``state``, ``children``, ``hint`` …).
:func:`error_from_response` turns such an answer into the matching class, so
callers branch with ``except NotFoundError`` or on ``err.code`` instead of
parsing messages, which may change.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ._records import dict_member, float_member, int_member, str_member

__all__ = [
    "PlatinumError",
    "APIConnectionError",
    "APITimeoutError",
    "WaitTimeoutError",
    "SandboxStateError",
    "StreamEndedError",
    "APIError",
    "InvalidRequestError",
    "SandboxTTLExceededError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "ConflictError",
    "SandboxNotReadyError",
    "SandboxDestroyedError",
    "SandboxFailedError",
    "SandboxNotResizableError",
    "DiskGrowUnsupportedError",
    "IdempotencyKeyReusedError",
    "IdempotencyKeyInProgressError",
    "QuotaExceededError",
    "PayloadTooLargeError",
    "NoSpaceError",
    "CapacityError",
    "UnavailableError",
    "InternalError",
]


class PlatinumError(Exception):
    """Base class of every error this SDK raises."""


class APIConnectionError(PlatinumError):
    """ptd could not be reached (refused, reset, DNS, TLS)."""


class APITimeoutError(PlatinumError, TimeoutError):
    """A request ran past its ``timeout`` before ptd answered."""


class WaitTimeoutError(PlatinumError, TimeoutError):
    """A wait for a state ran past the call's ``timeout``.

    ``sandbox`` is the record as last seen: the sandbox exists (a create is
    never repeated), so poll it, or delete it.
    """

    def __init__(self, message: str, sandbox: Mapping[str, Any] | None) -> None:
        super().__init__(message)
        self.sandbox = sandbox


class SandboxStateError(PlatinumError):
    """A wait ended with the sandbox settled in another state than the one
    asked for (failed, deleted, or moved by another call): waiting longer
    cannot help. ``sandbox`` is its record, ``reason`` the server's
    explanation."""

    def __init__(self, sandbox: Mapping[str, Any], want: str) -> None:
        self.sandbox = sandbox
        self.want = want
        self.got = str(sandbox.get("state", ""))
        self.reason = str(sandbox.get("reason") or "")
        msg = f"sandbox {sandbox.get('id')} is {self.got}, not {want}"
        if self.reason:
            msg += f": {self.reason}"
        super().__init__(msg)


class StreamEndedError(PlatinumError):
    """A stream (exec, process output) ended without its ``exit`` event:
    the connection broke, or ptd went away."""


class APIError(PlatinumError):
    """An error answer from ptd.

    ``status`` is the HTTP status, ``code`` the stable code, ``message`` the
    human text (it says what to do next), ``request_id`` the server's request
    id when it sent one, and ``body`` the whole decoded answer, for fields
    particular codes carry.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        body: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body: dict[str, Any] = dict(body or {})
        self.request_id = request_id
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.message} ({self.code}, HTTP {self.status})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, message={self.message!r})"

    @property
    def field(self) -> str | None:
        """The request field the error is about (invalid_request, not_found)."""
        return str_member(self.body, "field")

    @property
    def state(self) -> str | None:
        """The sandbox state a conflict or sandbox_not_ready is about."""
        return str_member(self.body, "state")


class InvalidRequestError(APIError):
    """400: bad input (``field`` names it). Nothing was changed."""


class SandboxTTLExceededError(InvalidRequestError):
    """400 sandbox_ttl_exceeded: the requested ``ttl_ms`` is over the plan's
    limit, ``max_ttl_ms``."""

    @property
    def max_ttl_ms(self) -> int | None:
        return int_member(self.body, "max_ttl_ms")


class UnauthorizedError(APIError):
    """401: no token, or a wrong one."""


class ForbiddenError(APIError):
    """403: the token may not do this (e.g. an org token creating orgs)."""


class NotFoundError(APIError):
    """404: unknown, deleted, or another organization's resource."""


class ConflictError(APIError):
    """409: the resource's state does not allow the call now."""

    @property
    def children(self) -> list[str]:
        """Live children that block deleting a parent: delete them first."""
        v = self.body.get("children")
        return [c for c in v if isinstance(c, str)] if isinstance(v, list) else []


class SandboxNotReadyError(ConflictError):
    """409 sandbox_not_ready: the sandbox is not running (``state`` says
    what it is): start it first."""


class SandboxDestroyedError(ConflictError):
    """409 sandbox_destroyed: the sandbox was killed or expired."""


class SandboxFailedError(ConflictError):
    """409 sandbox_failed: a wait ended with the sandbox failed. ``sandbox``
    is its record (``reason`` says why): start it again or delete it; do not
    create it again."""

    @property
    def sandbox(self) -> dict[str, Any]:
        return self.body


class SandboxNotResizableError(ConflictError):
    """409 sandbox_not_resizable: a running sandbox cannot change cpu or
    ram_mb live. ``hint`` says what to do instead (``action``,
    ``applies_at``, ``steps``); ``live_resize`` why."""

    @property
    def hint(self) -> dict[str, Any]:
        return dict_member(self.body, "hint")

    @property
    def live_resize(self) -> dict[str, Any]:
        return dict_member(self.body, "live_resize")


class DiskGrowUnsupportedError(ConflictError):
    """409 disk_grow_unsupported: the guest cannot grow its filesystem
    online: stop the sandbox, then resize it."""


class IdempotencyKeyReusedError(ConflictError):
    """409 idempotency_key_reused: the key was first used with another
    request; use a new key for a new request."""


class IdempotencyKeyInProgressError(ConflictError):
    """409 idempotency_key_in_progress: the first request with this key is
    still running (the client retries it by itself)."""


class QuotaExceededError(APIError):
    """429 quota_exceeded: the org's (or the sandbox tree's) limit would be
    passed. ``limit`` names it, ``max`` is its value, ``scope`` org or tree."""

    @property
    def limit(self) -> str | None:
        return str_member(self.body, "limit")

    @property
    def max(self) -> float | None:
        return float_member(self.body, "max")

    @property
    def scope(self) -> str | None:
        return str_member(self.body, "scope")


class PayloadTooLargeError(APIError):
    """413: the body (or the environment, env_too_large) is too large."""


class NoSpaceError(APIError):
    """507 no_space: the sandbox's disk (or the host's) is full."""


class CapacityError(APIError):
    """503 capacity: the host could not admit the call now (``reason``,
    ``queued_ms``); nothing changed, call again after ``retry_after``. The
    client already retried it a bounded number of times."""

    @property
    def reason(self) -> str | None:
        return str_member(self.body, "reason")

    @property
    def queued_ms(self) -> int | None:
        return int_member(self.body, "queued_ms")


class UnavailableError(APIError):
    """503 unavailable (or a 502/504 from a proxy): try again later."""


class InternalError(APIError):
    """500: a server fault; retry, and report it if it persists."""


_BY_CODE: dict[str, type[APIError]] = {
    "invalid_request": InvalidRequestError,
    "env_var_too_large": InvalidRequestError,
    "sandbox_ttl_exceeded": SandboxTTLExceededError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "sandbox_not_ready": SandboxNotReadyError,
    "sandbox_destroyed": SandboxDestroyedError,
    "sandbox_failed": SandboxFailedError,
    "sandbox_not_resizable": SandboxNotResizableError,
    "disk_grow_unsupported": DiskGrowUnsupportedError,
    "idempotency_key_reused": IdempotencyKeyReusedError,
    "idempotency_key_in_progress": IdempotencyKeyInProgressError,
    "quota_exceeded": QuotaExceededError,
    "payload_too_large": PayloadTooLargeError,
    "env_too_large": PayloadTooLargeError,
    "no_space": NoSpaceError,
    "capacity": CapacityError,
    "unavailable": UnavailableError,
    "internal": InternalError,
}

_BY_STATUS: dict[int, tuple[str, type[APIError]]] = {
    400: ("invalid_request", InvalidRequestError),
    401: ("unauthorized", UnauthorizedError),
    403: ("forbidden", ForbiddenError),
    404: ("not_found", NotFoundError),
    409: ("conflict", ConflictError),
    413: ("payload_too_large", PayloadTooLargeError),
    502: ("unavailable", UnavailableError),
    503: ("unavailable", UnavailableError),
    504: ("unavailable", UnavailableError),
    507: ("no_space", NoSpaceError),
}

# Error bodies are small; a misconfigured proxy could answer with anything.
MAX_ERROR_BODY = 64 << 10


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (the delta form ptd sends)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_from_response(status: int, headers: Mapping[str, str], raw: bytes) -> APIError:
    """Builds the APIError for a non-2xx answer. Answers that are not ptd's
    JSON shape (a proxy's HTML page) still get a code from the status, so
    ``except NotFoundError`` keeps working."""
    raw = raw[:MAX_ERROR_BODY]
    body: dict[str, Any] = {}
    message = ""
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        body = parsed
        message = str(parsed.get("error") or parsed.get("message") or "")
    elif raw.strip():
        text = raw.decode("utf-8", "replace").strip()
        message = text if len(text) <= 200 else text[:200] + "…"
    code = body.get("code") if isinstance(body.get("code"), str) else None
    if code and code in _BY_CODE:
        cls = _BY_CODE[code]
    elif code:
        cls = _BY_STATUS.get(status, ("", InternalError if status >= 500 else APIError))[1]
    else:
        code, cls = _BY_STATUS.get(status, ("internal" if status >= 500 else f"http_{status}",
                                            InternalError if status >= 500 else APIError))
    if not message:
        message = f"HTTP {status}"
    request_id = headers.get("x-request-id") or headers.get("request-id")
    return cls(message, status=status, code=str(code), body=body, request_id=request_id,
               retry_after=parse_retry_after(headers.get("retry-after")))
