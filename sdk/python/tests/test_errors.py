"""Error answers become the class of their code family (unit: no ptd)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from platinum import (
    APIError,
    CapacityError,
    ConflictError,
    ForbiddenError,
    IdempotencyKeyInProgressError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    QuotaExceededError,
    SandboxDestroyedError,
    SandboxNotResizableError,
    SandboxTTLExceededError,
    UnauthorizedError,
    UnavailableError,
)
from platinum._errors import error_from_response


@pytest.mark.parametrize("status,body,cls,code", [
    (400, {"code": "invalid_request", "error": "limit: at most 200", "field": "limit"}, InvalidRequestError,
     "invalid_request"),
    (400, {"code": "sandbox_ttl_exceeded", "error": "too long", "max_ttl_ms": 3600000}, SandboxTTLExceededError,
     "sandbox_ttl_exceeded"),
    (401, {"code": "unauthorized", "error": "bad token"}, UnauthorizedError, "unauthorized"),
    (403, {"code": "forbidden", "error": "admin only"}, ForbiddenError, "forbidden"),
    (404, {"code": "not_found", "error": "no such sandbox"}, NotFoundError, "not_found"),
    (409, {"code": "sandbox_destroyed", "error": "killed"}, SandboxDestroyedError, "sandbox_destroyed"),
    (409, {"code": "sandbox_not_resizable", "error": "stop first", "hint": {"action": "stop_then_resize"}},
     SandboxNotResizableError, "sandbox_not_resizable"),
    (409, {"code": "idempotency_key_in_progress", "error": "wait", "retry_after_ms": 1000},
     IdempotencyKeyInProgressError, "idempotency_key_in_progress"),
    (409, {"code": "something_new", "error": "a code newer than this SDK"}, ConflictError, "something_new"),
    (429, {"code": "quota_exceeded", "error": "over", "limit": "sandboxes", "max": 1}, QuotaExceededError,
     "quota_exceeded"),
    (503, {"code": "capacity", "error": "busy", "reason": "start_queue_timeout", "queued_ms": 30000},
     CapacityError, "capacity"),
    (502, "<html>bad gateway</html>", UnavailableError, "unavailable"),
    (500, "", InternalError, "internal"),
    (418, {"error": "teapot"}, APIError, "http_418"),
])
def test_error_classes(status: int, body: Any, cls: type[APIError], code: str) -> None:
    raw = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
    err = error_from_response(status, {"retry-after": "5", "x-request-id": "req_1"}, raw)
    assert type(err) is cls
    assert (err.status, err.code, err.request_id, err.retry_after) == (status, code, "req_1", 5.0)
    assert err.message
    if isinstance(body, dict):
        assert err.body == body


def test_structured_fields() -> None:
    e = error_from_response(409, {}, json.dumps({
        "code": "sandbox_not_resizable", "error": "x", "live_resize": {"supported": False, "reason": "r"},
        "hint": {"action": "stop_then_resize", "applies_at": "restart", "steps": ["a", "b"]}}).encode())
    assert isinstance(e, SandboxNotResizableError)
    assert e.hint["steps"] == ["a", "b"] and e.live_resize["reason"] == "r"
    c = error_from_response(409, {}, b'{"code":"conflict","error":"has children","children":["sbx_1"]}')
    assert isinstance(c, ConflictError) and c.children == ["sbx_1"]
    f = error_from_response(400, {}, b'{"code":"invalid_request","error":"bad","field":"cpu"}')
    assert f.field == "cpu" and "bad" in str(f) and "invalid_request" in str(f)
