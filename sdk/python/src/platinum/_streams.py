"""Streamed bodies: NDJSON command output and file downloads.

Events are parsed by one function for both clients; only the loop that
pulls lines differs (``iter_lines`` / ``aiter_lines``). Nothing here keeps a
whole body: each event or chunk is handed on as it arrives.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Callable, Iterator, Self

import httpx

from ._core import Reply, ndjson_object
from ._errors import APIError, StreamEndedError
from ._records import ExecEvent, ExecResult

Sink = Callable[[str], Any]


def parse_event(line: str) -> ExecEvent | None:
    """One NDJSON line as an event (None for a blank line). An ``error``
    event raises the APIError it carries."""
    d = ndjson_object(line, "stream event")
    if d is None:
        return None
    if d.get("type") == "error":
        raise APIError(str(d.get("error") or "stream error"), status=200, code=str(d.get("code") or "internal"),
                       body=d)
    return ExecEvent(d)


def json_result_events(body: bytes) -> list[ExecEvent]:
    """The events a plain JSON exec answer stands for (a server that could
    not stream answered with the whole result)."""
    r = json.loads(body)
    evs = []
    if r.get("stdout"):
        evs.append(ExecEvent({"type": "stdout", "data": r["stdout"]}))
    if r.get("stderr"):
        evs.append(ExecEvent({"type": "stderr", "data": r["stderr"]}))
    evs.append(ExecEvent({"type": "exit", "exit_code": r.get("exit_code", 0), "timed_out": r.get("timed_out", False)}))
    return evs


def _is_json(resp: httpx.Response) -> bool:
    ct: str = resp.headers.get("content-type", "")
    return ct.split(";")[0].strip() == "application/json"


class _StreamState:
    """What a stream has seen: the pid of its ``start`` event, and the
    result once ``exit`` arrived."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.result: ExecResult | None = None
        self.stdout: list[str] | None = None
        self.stderr: list[str] | None = None

    def see(self, ev: ExecEvent, on_stdout: Sink | None, on_stderr: Sink | None) -> None:
        t = ev.type
        if t == "start":
            self.pid = ev.pid
        elif t == "stdout":
            if on_stdout is not None:
                on_stdout(ev.data)
            if self.stdout is not None:
                self.stdout.append(ev.data)
        elif t == "stderr":
            if on_stderr is not None:
                on_stderr(ev.data)
            if self.stderr is not None:
                self.stderr.append(ev.data)
        elif t == "exit":
            self.result = ExecResult({"exit_code": ev.exit_code, "timed_out": ev.timed_out,
                                      "stdout": "".join(self.stdout or []), "stderr": "".join(self.stderr or [])})


class _Body:
    """A streamed reply's open response; until it is closed it holds a
    connection of the client's pool."""

    def __init__(self, reply: Reply) -> None:
        self._resp: httpx.Response = reply.raw


class _SyncBody(_Body):
    """Closing, and ``with``, for the blocking streams."""

    def close(self) -> None:
        self._resp.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _AsyncBody(_Body):
    """Closing, and ``async with``, for the asyncio streams."""

    async def aclose(self) -> None:
        await self._resp.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _ExecBody(_Body):
    """What both exec streams show of the events read so far."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self._st = _StreamState()

    @property
    def pid(self) -> int | None:
        return self._st.pid

    @property
    def result(self) -> ExecResult | None:
        return self._st.result


class _DownloadBody(_Body):
    """What both download streams share: the chunk size and the length."""

    def __init__(self, reply: Reply, chunk_size: int) -> None:
        super().__init__(reply)
        self._chunk = chunk_size

    @property
    def size(self) -> int | None:
        """Content-Length, when the server sent it."""
        v = self._resp.headers.get("content-length")
        return int(v) if v and v.isdigit() else None


class ExecStream(_ExecBody, _SyncBody):
    """A running command's output, event by event (``for ev in stream``),
    ending with its ``exit``. Use it as a context manager, or exhaust it,
    so the connection is released. ``result`` is set once it ended."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self._pending: list[ExecEvent] = []
        self._lines: Iterator[str] | None = None
        if _is_json(self._resp):
            self._pending = json_result_events(self._resp.read())
            self._resp.close()
        else:
            self._lines = self._resp.iter_lines()

    def _next(self) -> ExecEvent | None:
        if self._pending:
            return self._pending.pop(0)
        if self._lines is None or self._st.result is not None:
            return None
        try:
            for line in self._lines:
                ev = parse_event(line)
                if ev is not None:
                    return ev
        except httpx.HTTPError as e:
            raise StreamEndedError(f"stream broke before the exit event: {e}") from e
        raise StreamEndedError("stream ended without an exit event")

    def _pull(self, on_stdout: Sink | None = None, on_stderr: Sink | None = None) -> ExecEvent | None:
        ev = self._next()
        if ev is not None:
            self._st.see(ev, on_stdout, on_stderr)
            if ev.type == "exit":
                self.close()
        return ev

    def __iter__(self) -> Iterator[ExecEvent]:
        try:
            while (ev := self._pull()) is not None:
                yield ev
        finally:
            if self._st.result is None:
                self.close()

    def wait(self, on_stdout: Sink | None = None, on_stderr: Sink | None = None, *,
             collect: bool = True) -> ExecResult:
        """Reads the stream to its end, calling on_stdout / on_stderr with
        each chunk as it arrives, and returns the result (with the whole
        output unless ``collect=False``)."""
        if collect and self._st.stdout is None:
            self._st.stdout, self._st.stderr = [], []
        try:
            while self._st.result is None:
                if self._pull(on_stdout, on_stderr) is None:
                    break
        finally:
            self.close()
        if self._st.result is None:
            raise StreamEndedError("stream ended without an exit event")
        return self._st.result


class AsyncExecStream(_ExecBody, _AsyncBody):
    """The async ExecStream: ``async for ev in stream``, ``await
    stream.wait()``, ``async with``."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self._pending: list[ExecEvent] | None = None
        self._lines: AsyncIterator[str] | None = None

    async def _open(self) -> None:
        if self._pending is not None:
            return
        self._pending = []
        if _is_json(self._resp):
            self._pending = json_result_events(await self._resp.aread())
            await self._resp.aclose()
        else:
            self._lines = self._resp.aiter_lines()

    async def _next(self) -> ExecEvent | None:
        await self._open()
        if self._pending:
            return self._pending.pop(0)
        if self._lines is None or self._st.result is not None:
            return None
        try:
            async for line in self._lines:
                ev = parse_event(line)
                if ev is not None:
                    return ev
        except httpx.HTTPError as e:
            raise StreamEndedError(f"stream broke before the exit event: {e}") from e
        raise StreamEndedError("stream ended without an exit event")

    async def _pull(self, on_stdout: Sink | None = None, on_stderr: Sink | None = None) -> ExecEvent | None:
        ev = await self._next()
        if ev is not None:
            self._st.see(ev, on_stdout, on_stderr)
            if ev.type == "exit":
                await self.aclose()
        return ev

    async def __aiter__(self) -> AsyncIterator[ExecEvent]:
        try:
            while (ev := await self._pull()) is not None:
                yield ev
        finally:
            if self._st.result is None:
                await self.aclose()

    async def wait(self, on_stdout: Sink | None = None, on_stderr: Sink | None = None, *,
                   collect: bool = True) -> ExecResult:
        if collect and self._st.stdout is None:
            self._st.stdout, self._st.stderr = [], []
        try:
            while self._st.result is None:
                if await self._pull(on_stdout, on_stderr) is None:
                    break
        finally:
            await self.aclose()
        if self._st.result is None:
            raise StreamEndedError("stream ended without an exit event")
        return self._st.result


class ByteStream(_DownloadBody, _SyncBody):
    """A download, chunk by chunk (``for chunk in stream``); a context
    manager that releases the connection."""

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._resp.iter_bytes(self._chunk)
        except httpx.HTTPError as e:
            raise StreamEndedError(f"download broke: {e}") from e
        finally:
            self._resp.close()


class AsyncByteStream(_DownloadBody, _AsyncBody):
    """The async ByteStream: ``async for chunk in stream``."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._resp.aiter_bytes(self._chunk):
                yield chunk
        except httpx.HTTPError as e:
            raise StreamEndedError(f"download broke: {e}") from e
        finally:
            await self._resp.aclose()
