"""Run code: cells in stateful Python, JavaScript and bash contexts of a
sandbox of the ``code-interpreter`` template (docs/code-interpreter.md).

The cell's events (NDJSON) are folded into an :class:`Execution` by one
class for both clients; only the loop that pulls lines differs. A cell's
own error (an exception, a timeout) is ``execution.error``, not raised:
only a failed call raises.
"""

from __future__ import annotations

import base64
import builtins
from typing import Any, Callable, Mapping

from ._core import FOREVER, Core, Deadline, Op, Reply, ndjson_object, seg, want_dict
from ._errors import PlatinumError
from ._records import Record, field, str_member

__all__ = ["Result", "ExecutionError", "Execution", "Logs", "CodeContext", "CodeOps", "CodeFold"]

LANGUAGES = ("python", "javascript", "typescript", "bash")


class Result(Record):
    """One rich result of a cell: a MIME bundle (``result["image/png"]``)
    with attributes for the usual types. Binary types are base64 as sent;
    :meth:`bytes` decodes them."""

    __slots__ = ("is_main_result",)

    def __init__(self, data: Mapping[str, Any] | None = None, is_main_result: bool = False) -> None:
        super().__init__(data)
        #: The cell's last expression (True) versus ``display()`` output.
        self.is_main_result = is_main_result

    def _s(self, mime: str) -> str | None:
        return str_member(self._data, mime)

    @property
    def text(self) -> str | None:
        return self._s("text/plain")

    @property
    def html(self) -> str | None:
        return self._s("text/html")

    @property
    def markdown(self) -> str | None:
        return self._s("text/markdown")

    @property
    def svg(self) -> str | None:
        return self._s("image/svg+xml")

    @property
    def latex(self) -> str | None:
        return self._s("text/latex")

    @property
    def png(self) -> str | None:
        """``image/png``, base64 (``bytes("image/png")`` decodes it)."""
        return self._s("image/png")

    @property
    def jpeg(self) -> str | None:
        return self._s("image/jpeg")

    @property
    def pdf(self) -> str | None:
        return self._s("application/pdf")

    @property
    def json(self) -> Any:
        return self._data.get("application/json")

    def bytes(self, mime: str) -> builtins.bytes | None:
        """The decoded form of a base64 type (``image/png``, ``image/jpeg``,
        ``application/pdf``); None when the result has none."""
        s = self._s(mime)
        return base64.b64decode(s) if s is not None else None

    def formats(self) -> list[str]:
        """The MIME types this result has."""
        return list(self._data)


class ExecutionError(Record):
    """The error a cell raised: ``TimeoutError`` for one interrupted at its
    timeout, ``KernelDied`` for one that killed its kernel."""

    __slots__ = ()
    name: field[str] = field("")
    value: field[str] = field("")
    traceback: field[str] = field("")


class CodeContext(Record):
    """A context: one kernel whose state persists across cells."""

    __slots__ = ()
    #: ``ctx_…`` (``ctx_default_<language>`` for a language's default).
    id: field[str] = field("")
    language: field[str] = field("")
    cwd: field[str] = field("")
    default: field[bool] = field(False)


class Logs:
    """A cell's output, chunk by chunk as it arrived."""

    __slots__ = ("stdout", "stderr")

    def __init__(self) -> None:
        self.stdout: list[str] = []
        self.stderr: list[str] = []


class Execution:
    """How a cell ended: its results, output, error and context."""

    def __init__(self) -> None:
        self.results: list[Result] = []
        self.logs = Logs()
        self.error: ExecutionError | None = None
        self.context_id = ""
        self.execution_count: int | None = None
        #: ``ok``, ``error``, ``timeout``, ``interrupted`` or ``disconnected``.
        self.status = ""
        self.duration_ms = 0.0
        #: Why the cell ran in a fresh kernel (the context's last one died).
        self.kernel_restarted: str | None = None

    @property
    def text(self) -> str | None:
        """The main result's text/plain form."""
        return next((r.text for r in self.results if r.is_main_result), None)

    @property
    def stdout(self) -> str:
        return "".join(self.logs.stdout)

    @property
    def stderr(self) -> str:
        return "".join(self.logs.stderr)

    def __repr__(self) -> str:
        return (f"Execution(status={self.status!r}, text={self.text!r}, results={len(self.results)}, "
                f"error={self.error!r}, execution_count={self.execution_count!r})")


OnText = Callable[[str], Any]
OnResult = Callable[[Result], Any]
OnError = Callable[[ExecutionError], Any]


class CodeFold:
    """Folds a cell's NDJSON lines into an Execution, calling the callbacks
    with each event as it arrives."""

    def __init__(self, on_stdout: OnText | None, on_stderr: OnText | None, on_result: OnResult | None,
                 on_error: OnError | None) -> None:
        self.ex = Execution()
        self._cb = (on_stdout, on_stderr, on_result, on_error)

    def line(self, line: str) -> Execution | None:
        """Takes one line; returns the Execution once the end event came."""
        ev = ndjson_object(line, "code event")
        if ev is None:
            return None
        on_stdout, on_stderr, on_result, on_error = self._cb
        ex, t = self.ex, ev.get("type")
        if t == "stdout" or t == "stderr":
            text = str(ev.get("text") or "")
            (ex.logs.stdout if t == "stdout" else ex.logs.stderr).append(text)
            cb = on_stdout if t == "stdout" else on_stderr
            if cb is not None:
                cb(text)
        elif t == "result":
            r = Result(ev.get("data") or {}, bool(ev.get("is_main_result")))
            ex.results.append(r)
            if on_result is not None:
                on_result(r)
        elif t == "error":
            ex.error = ExecutionError({k: ev.get(k) for k in ("name", "value", "traceback")})
            if on_error is not None:
                on_error(ex.error)
        elif t == "kernel_restarted":
            ex.kernel_restarted = str(ev.get("reason") or "")
        elif t == "end":
            ex.context_id = str(ev.get("context_id") or "")
            n = ev.get("execution_count")
            ex.execution_count = int(n) if n is not None else None
            ex.status = str(ev.get("status") or "")
            ex.duration_ms = float(ev.get("duration_ms") or 0)
            return ex
        # Event types added later carry nothing this version needs.
        return None


def _context_id(context: str | CodeContext | None) -> str | None:
    return context.id if isinstance(context, CodeContext) else context


def _context_path(context: str | CodeContext) -> str:
    return "/contexts/" + seg(_context_id(context) or "")


class CodeOps:
    """The code interpreter of one sandbox (``sbx.run_code``,
    ``sbx.code_contexts``)."""

    def __init__(self, core: Core, id: str) -> None:
        self.core = core
        self.path = f"/v1/sandboxes/{seg(id)}/code"

    def run(self, code: str, *, language: str | None, context: str | CodeContext | None,
            env: Mapping[str, str] | None, cwd: str | None, timeout_ms: int | None,
            timeout: float | None) -> Op[Reply]:
        if language is not None and language not in LANGUAGES:
            raise PlatinumError(f"run_code: unknown language {language!r}; use one of {', '.join(LANGUAGES)}")
        body: dict[str, Any] = {"code": code}
        for k, v in (("language", language), ("context_id", _context_id(context)),
                     ("env", dict(env) if env is not None else None), ("cwd", cwd), ("timeout_ms", timeout_ms)):
            if v is not None:
                body[k] = v
        return (yield from self.core.request(
            "POST", self.path, json=body, has_json=True, headers={"Accept": "application/x-ndjson"},
            deadline=Deadline(timeout), http_timeout=FOREVER if timeout is None else timeout, stream=True))

    def create_context(self, *, language: str | None = None, cwd: str | None = None,
                       timeout: float | None = None) -> Op[dict[str, Any]]:
        """Starts a new context (a fresh kernel)."""
        body = {k: v for k, v in (("language", language), ("cwd", cwd)) if v is not None}
        return want_dict((yield from self.core.call("POST", self.path + "/contexts", body,
                                                    deadline=Deadline(timeout))))

    def list_contexts(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        """The sandbox's contexts (default ones once used)."""
        out = want_dict((yield from self.core.call("GET", self.path + "/contexts", deadline=Deadline(timeout))))
        return list(out.get("contexts") or [])

    def restart_context(self, context: str | CodeContext, *, timeout: float | None = None) -> Op[None]:
        """Replaces the context's kernel; its state is dropped."""
        yield from self.core.call("POST", self.path + _context_path(context) + "/restart",
                                  deadline=Deadline(timeout))

    def interrupt_context(self, context: str | CodeContext, *, timeout: float | None = None) -> Op[bool]:
        """Interrupts the context's running cell (its state is kept);
        returns whether one was running."""
        out = want_dict((yield from self.core.call("POST", self.path + _context_path(context) + "/interrupt",
                                                   deadline=Deadline(timeout))))
        return bool(out.get("interrupted"))

    def delete_context(self, context: str | CodeContext, *, timeout: float | None = None) -> Op[None]:
        """Stops the context's kernel and forgets it."""
        yield from self.core.call("DELETE", self.path + _context_path(context),
                                  deadline=Deadline(timeout))
