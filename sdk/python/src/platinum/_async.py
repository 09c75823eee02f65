"""The asyncio client, :class:`AsyncPlatinum`: runs the shared operations
with httpx's async client, so no call blocks the event loop."""

from __future__ import annotations

import builtins
import functools
import asyncio
from functools import cached_property
from typing import (IO, Any, AsyncIterable, AsyncIterator, Callable, Concatenate, Coroutine, Iterable, Mapping,
                    ParamSpec, Sequence, TypeVar)

import httpx

from . import _ops
from ._code import CodeContext, CodeFold, CodeOps, Execution, OnError, OnResult, OnText
from ._convert import none as _none, rec as _rec, recs as _recs, same as _same
from ._core import Close, Core, Op, ReadBody, Reply, Req, Sleep
from ._errors import APIConnectionError, PlatinumError, StreamEndedError
from ._ops import (
    ArtifactsOps,
    FilesOps,
    OrgsOps,
    PreviewOps,
    ProcessesOps,
    ProjectsOps,
    SandboxesOps,
    SandboxOps,
    SnapshotsOps,
    TemplatesOps,
)
from ._records import (
    Artifact,
    EnvResult,
    ExecResult,
    FileEntry,
    Metrics,
    NetworkResult,
    Page,
    PreviewURL,
    Process,
    Project,
    Record,
    ResizeResult,
    SandboxFields,
    Snapshot,
    Usage,
)
from ._streams import AsyncByteStream, AsyncExecStream, Sink
from ._transport import BaseRunner, reply, transport_error

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")

CHUNK = 64 << 10


class AsyncRunner(BaseRunner[httpx.AsyncClient]):
    """Runs operations with awaited I/O on one httpx.AsyncClient."""

    async def _send(self, r: Req) -> Reply:
        return reply(r, await self.http.send(self._request(r), stream=r.stream))

    async def run(self, op: Op[T]) -> T:
        value: Any = None
        exc: BaseException | None = None
        while True:
            try:
                step = op.throw(exc) if exc is not None else op.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value, exc = None, None
            if isinstance(step, Req):
                try:
                    value = await self._send(step)
                except httpx.TransportError as e:
                    exc = transport_error(step, e)
            elif isinstance(step, Sleep):
                if step.seconds > 0:
                    await asyncio.sleep(step.seconds)
            elif isinstance(step, ReadBody):
                resp: httpx.Response = step.reply.raw
                try:
                    buf = bytearray()
                    async for chunk in resp.aiter_bytes():
                        buf += chunk
                        if step.limit is not None and len(buf) >= step.limit:
                            break
                    value = bytes(buf)
                except httpx.HTTPError as e:
                    exc = APIConnectionError(f"reading the answer: {e}")
                finally:
                    await resp.aclose()
            elif isinstance(step, Close):
                await step.reply.raw.aclose()


def _method(conv: Callable[[Any, R], T]) -> Callable[[Callable[Concatenate[Any, P], Op[R]]],
                                                     Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]]:
    """Makes a coroutine method of an operation: it runs ``op(self._ops, …)``
    and converts the result with ``conv(self, result)``."""

    def deco(f: Callable[Concatenate[Any, P], Op[R]]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
        @functools.wraps(f)
        async def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return conv(self, await self._c.run(f(self._ops, *args, **kwargs)))

        return method

    return deco


def _sandbox(self: Any, d: Mapping[str, Any]) -> "AsyncSandbox":
    return AsyncSandbox(self._c, d)


def _sandboxes(self: Any, ds: Iterable[Mapping[str, Any]]) -> builtins.list["AsyncSandbox"]:
    return [AsyncSandbox(self._c, d) for d in ds]


def _page(self: Any, d: Mapping[str, Any]) -> "AsyncSandboxPage":
    return AsyncSandboxPage({**d, "rows": [AsyncSandbox(self._c, r) for r in d.get("rows") or []]})


def _update(self: "AsyncSandbox", d: Mapping[str, Any]) -> "AsyncSandbox":
    self._data = dict(d)
    return self


def _exec_stream(_: Any, reply: Reply) -> AsyncExecStream:
    return AsyncExecStream(reply)


def _fork(self: Any, d: Mapping[str, Any]) -> Record:
    return Record({**d, "sandboxes": [AsyncSandbox(self._c, s) for s in d.get("sandboxes") or []]})


class AsyncSandboxPage(Page["AsyncSandbox"]):
    """One page of a sandbox list: ``page["rows"]`` (handles, newest first),
    and ``page["total"]`` when asked with ``paginated=True``."""

    __slots__ = ()


class AsyncCommands:
    """``await sbx.commands.run(cmd)``: run a command and get its result."""

    def __init__(self, c: AsyncRunner, ops: SandboxOps) -> None:
        self._c = c
        self._ops = ops

    run = _method(_rec(ExecResult))(SandboxOps.exec)


class AsyncFiles:
    """Files in one sandbox (see Files); transfers stream in chunks."""

    def __init__(self, c: AsyncRunner, id: str) -> None:
        self._c = c
        self._ops = FilesOps(c.core, id)

    async def read_stream(self, path: str, *, chunk_size: int = CHUNK,
                          timeout: float | None = None) -> AsyncByteStream:
        """The file's content as an async iterator of chunks (``async
        with``, or exhaust it). A directory raises IsADirectoryError."""
        return AsyncByteStream(await self._c.run(self._ops.open(path, timeout=timeout)), chunk_size)

    async def read_bytes(self, path: str, *, timeout: float | None = None) -> bytes:
        buf = bytearray()
        async with await self.read_stream(path, timeout=timeout) as s:
            async for chunk in s:
                buf += chunk
        return bytes(buf)

    async def read(self, path: str, *, encoding: str = "utf-8", timeout: float | None = None) -> str:
        return (await self.read_bytes(path, timeout=timeout)).decode(encoding)

    async def write(self, path: str, data: str | bytes | IO[bytes] | Iterable[bytes] | AsyncIterable[bytes], *,
                    idempotency_key: str | None = None, timeout: float | None = None) -> Record:
        """Creates or replaces the file with ``data``: text, bytes, a binary
        file object (read in a worker thread, so the loop never blocks on
        the disk), or an (async) iterable of chunks, streamed."""
        content: Any
        rewindable = False
        if isinstance(data, str):
            content, rewindable = data.encode(), True
        elif isinstance(data, (bytes, bytearray, memoryview)):
            content, rewindable = bytes(data), True
        elif hasattr(data, "read"):
            f = data

            async def from_file() -> AsyncIterator[bytes]:
                while chunk := await asyncio.to_thread(f.read, CHUNK):
                    yield chunk

            content = from_file()
        elif isinstance(data, AsyncIterable):
            content = data
        else:
            it = data

            async def from_iter() -> AsyncIterator[bytes]:
                for chunk in it:
                    yield chunk

            content = from_iter()
        return Record(await self._c.run(self._ops.write(path, content, rewindable=rewindable,
                                                        idempotency_key=idempotency_key, timeout=timeout)))

    list = _method(_recs(FileEntry))(FilesOps.list)
    mkdir = _method(_same)(FilesOps.mkdir)
    remove = _method(_none)(FilesOps.remove)


class AsyncProcessStream(AsyncExecStream):
    """A process's output (see AsyncExecStream), with calls to its stdin,
    signals and PTY. Closing the stream does not end the process."""

    def __init__(self, reply: Reply, procs: "AsyncProcesses", pid: int | None = None) -> None:
        super().__init__(reply)
        self._procs = procs
        if pid is not None:
            self._st.pid = pid

    async def _read_start(self) -> None:
        first = await self._pull()  # the start event names the pid
        if first is not None and first.type != "start" and self._pending is not None:
            self._pending.insert(0, first)

    def _need_pid(self) -> int:
        if self.pid is None:
            raise PlatinumError("the process stream has no pid")
        return self.pid

    async def send_input(self, data: str | bytes | None = None, *, eof: bool = False,
                   timeout: float | None = None) -> None:
        await self._procs.send_input(self._need_pid(), data, eof=eof, timeout=timeout)

    async def signal(self, signal: str = "SIGTERM", *, timeout: float | None = None) -> None:
        await self._procs.signal(self._need_pid(), signal, timeout=timeout)

    async def resize(self, cols: int, rows: int, *, timeout: float | None = None) -> None:
        await self._procs.resize(self._need_pid(), cols, rows, timeout=timeout)

    async def kill(self, *, timeout: float | None = None) -> None:
        await self._procs.kill(self._need_pid(), timeout=timeout)

    async def close_stdin(self, *, timeout: float | None = None) -> None:
        await self.send_input(eof=True, timeout=timeout)

    async def disconnect(self) -> None:
        """Stops reading the output; the process keeps running."""
        await self.aclose()


class AsyncProcesses:
    """Processes in one sandbox (see Processes)."""

    def __init__(self, c: AsyncRunner, id: str) -> None:
        self._c = c
        self._ops = ProcessesOps(c.core, id)

    start = _method(_rec(Process))(ProcessesOps.start)
    list = _method(_recs(Process))(ProcessesOps.list)
    send_input = _method(_none)(ProcessesOps.send_input)
    signal = _method(_none)(ProcessesOps.signal)
    resize = _method(_none)(ProcessesOps.resize)
    kill = _method(_none)(ProcessesOps.kill)

    async def start_stream(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                           cwd: str | None = None, tag: str | None = None, stdin: bool = False,
                           pty: tuple[int, int] | None = None, timeout_ms: int | None = None,
                           timeout: float | None = None) -> AsyncProcessStream:
        reply = await self._c.run(self._ops.start_stream(cmd, env=env, cwd=cwd, tag=tag, stdin=stdin, pty=pty,
                                                         timeout_ms=timeout_ms, timeout=timeout))
        ps = AsyncProcessStream(reply, self)
        await ps._read_start()
        return ps

    async def connect(self, pid: int, *, timeout: float | None = None) -> AsyncProcessStream:
        return AsyncProcessStream(await self._c.run(self._ops.connect(pid, timeout=timeout)), self, pid)


class AsyncCodeContexts:
    """The code interpreter's contexts in one sandbox (``sbx.code_contexts``):
    each one kernel whose state persists across cells."""

    def __init__(self, c: AsyncRunner, id: str) -> None:
        self._c = c
        self._ops = CodeOps(c.core, id)

    create = _method(_rec(CodeContext))(CodeOps.create_context)
    list = _method(_recs(CodeContext))(CodeOps.list_contexts)
    restart = _method(_none)(CodeOps.restart_context)
    interrupt = _method(_same)(CodeOps.interrupt_context)
    delete = _method(_none)(CodeOps.delete_context)


class AsyncPreview:
    def __init__(self, c: AsyncRunner, id: str) -> None:
        self._c = c
        self._ops = PreviewOps(c.core, id)

    url = _method(_rec(PreviewURL))(PreviewOps.url)
    set_public = _method(_rec(PreviewURL))(PreviewOps.set_public)
    revoke = _method(_none)(PreviewOps.revoke)


class AsyncArtifacts:
    def __init__(self, c: AsyncRunner, sandbox_id: str | None = None) -> None:
        self._c = c
        self._ops = ArtifactsOps(c.core, sandbox_id)

    create = _method(_rec(Artifact))(ArtifactsOps.create)
    get = _method(_rec(Artifact))(ArtifactsOps.get)
    delete = _method(_none)(ArtifactsOps.delete)

    async def read_stream(self, id: str, *, chunk_size: int = CHUNK,
                          timeout: float | None = None) -> AsyncByteStream:
        return AsyncByteStream(await self._c.run(self._ops.open(id, timeout=timeout)), chunk_size)

    async def read_bytes(self, id: str, *, timeout: float | None = None) -> bytes:
        buf = bytearray()
        async with await self.read_stream(id, timeout=timeout) as s:
            async for chunk in s:
                buf += chunk
        return bytes(buf)

    list = _method(_recs(Artifact))(ArtifactsOps.list)


class AsyncSandbox(SandboxFields):
    """The async handle on one sandbox (see Sandbox): every call is a
    coroutine."""

    def __init__(self, c: AsyncRunner, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self._c = c
        self._ops = SandboxOps(c.core, str(data.get("id", "")))

    @cached_property
    def files(self) -> AsyncFiles:
        return AsyncFiles(self._c, self.id)

    @cached_property
    def processes(self) -> AsyncProcesses:
        return AsyncProcesses(self._c, self.id)

    @cached_property
    def commands(self) -> AsyncCommands:
        return AsyncCommands(self._c, self._ops)

    @cached_property
    def code_contexts(self) -> AsyncCodeContexts:
        return AsyncCodeContexts(self._c, self.id)

    @cached_property
    def preview(self) -> AsyncPreview:
        return AsyncPreview(self._c, self.id)

    @cached_property
    def artifacts(self) -> AsyncArtifacts:
        return AsyncArtifacts(self._c, self.id)

    refresh = _method(_update)(SandboxOps.refresh)
    set_env = _method(_rec(EnvResult))(SandboxOps.set_env)
    update = _method(_update)(SandboxOps.update)
    rename = _method(_update)(SandboxOps.rename)
    set_auto_resume = _method(_update)(SandboxOps.set_auto_resume)
    stop = _method(_update)(SandboxOps.stop)
    pause = _method(_update)(SandboxOps.pause)
    start = _method(_update)(SandboxOps.start)
    resume = _method(_update)(SandboxOps.resume)
    archive = _method(_update)(SandboxOps.archive)
    wait_for_state = _method(_update)(SandboxOps.wait_for_state)
    resize = _method(_rec(ResizeResult))(SandboxOps.resize)
    delete = _method(_update)(SandboxOps.delete)
    kill = _method(_update)(SandboxOps.kill)
    set_ttl = _method(_update)(SandboxOps.set_ttl)
    metrics = _method(_rec(Metrics))(SandboxOps.metrics)
    usage = _method(_rec(Usage))(SandboxOps.usage)
    children = _method(_sandboxes)(SandboxOps.children)
    snapshot = _method(_rec(Snapshot))(SandboxOps.snapshot)
    snapshots = _method(_recs(Snapshot))(SandboxOps.snapshots)
    restore = _method(_update)(SandboxOps.restore)
    fork = _method(_fork)(SandboxOps.fork)
    backup = _method(_rec(Snapshot))(SandboxOps.backup)
    backups = _method(_recs(Snapshot))(SandboxOps.backups)
    set_network = _method(_rec(NetworkResult))(SandboxOps.set_network)

    async def run_code(self, code: str, *, language: str | None = None,
                       context: str | CodeContext | None = None, env: Mapping[str, str] | None = None,
                       cwd: str | None = None, timeout_ms: int | None = None, on_stdout: OnText | None = None,
                       on_stderr: OnText | None = None, on_result: OnResult | None = None,
                       on_error: OnError | None = None, timeout: float | None = None) -> Execution:
        """See Sandbox.run_code."""
        reply = await self._c.run(CodeOps(self._c.core, self.id).run(
            code, language=language, context=context, env=env, cwd=cwd, timeout_ms=timeout_ms, timeout=timeout))
        fold = CodeFold(on_stdout, on_stderr, on_result, on_error)
        resp: httpx.Response = reply.raw
        try:
            async for line in resp.aiter_lines():
                if (ex := fold.line(line)) is not None:
                    return ex
        except httpx.HTTPError as e:
            raise StreamEndedError(f"the code stream broke before the cell ended: {e}") from e
        finally:
            await resp.aclose()
        raise StreamEndedError("the code stream ended without an end event")

    async def exec_stream(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                          cwd: str | None = None, timeout_ms: int | None = None, stdin: str | None = None,
                          timeout: float | None = None) -> AsyncExecStream:
        return AsyncExecStream(await self._c.run(self._ops.exec_stream(
            cmd, env=env, cwd=cwd, timeout_ms=timeout_ms, stdin=stdin, timeout=timeout)))

    async def exec(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                   cwd: str | None = None, timeout_ms: int | None = None, stdin: str | None = None,
                   on_stdout: Sink | None = None, on_stderr: Sink | None = None,
                   timeout: float | None = None) -> ExecResult:
        """See Sandbox.exec."""
        if on_stdout is None and on_stderr is None:
            return ExecResult(await self._c.run(self._ops.exec(cmd, env=env, cwd=cwd, timeout_ms=timeout_ms,
                                                               stdin=stdin, timeout=timeout)))
        s = await self.exec_stream(cmd, env=env, cwd=cwd, timeout_ms=timeout_ms, stdin=stdin, timeout=timeout)
        return await s.wait(on_stdout, on_stderr, collect=False)

    async def preview_url(self, port: int, *, expires_in: int | None = None,
                          timeout: float | None = None) -> PreviewURL:
        return await self.preview.url(port, expires_in=expires_in, timeout=timeout)


class AsyncSandboxes:
    """``client.sandboxes`` of the async client (see Sandboxes)."""

    def __init__(self, c: AsyncRunner) -> None:
        self._c = c
        self._ops = SandboxesOps(c.core)

    create = _method(_sandbox)(SandboxesOps.create)
    get = _method(_sandbox)(SandboxesOps.get)
    children = _method(_sandboxes)(SandboxesOps.children)
    update = _method(_sandbox)(SandboxesOps.update)
    set_ttl = _method(_sandbox)(SandboxesOps.set_ttl)
    kill = _method(_sandbox)(SandboxesOps.kill)
    delete = _method(_sandbox)(SandboxesOps.delete)
    wait_for_state = _method(_sandbox)(SandboxesOps.wait_for_state)

    async def connect(self, id: str, *, timeout: float | None = None) -> AsyncSandbox:
        return AsyncSandbox(self._c, await self._c.run(self._ops.get(id, timeout=timeout)))

    async def iter(self, *, state: str | None = None, limit: int | None = None, offset: int | None = None,
                   parent_id: str | None = None, roots_only: bool | None = None,
                   metadata: Mapping[str, str] | None = None, project_id: str | None = None,
                   include: Sequence[str] | None = None, timeout: float | None = None) -> AsyncIterator[AsyncSandbox]:
        """``async for s in client.sandboxes.iter(...)``: every matching
        sandbox, page by page."""
        size = min(limit or 100, 200)
        off = offset or 0
        while True:
            page = await self._c.run(self._ops.list(
                state=state, limit=size, offset=off, parent_id=parent_id, roots_only=roots_only,
                metadata=metadata, project_id=project_id, include=include, timeout=timeout))
            rows = page["rows"]
            for r in rows:
                yield AsyncSandbox(self._c, r)
            if len(rows) < size:
                return
            off += len(rows)

    list = _method(_page)(SandboxesOps.list)


class AsyncSnapshots:
    def __init__(self, c: AsyncRunner) -> None:
        self._c = c
        self._ops = SnapshotsOps(c.core)

    get = _method(_rec(Snapshot))(SnapshotsOps.get)
    delete = _method(_none)(SnapshotsOps.delete)
    wait = _method(_rec(Snapshot))(SnapshotsOps.wait)


class AsyncOrgs:
    def __init__(self, c: AsyncRunner) -> None:
        self._c = c
        self._ops = OrgsOps(c.core)

    create = _method(_rec(Record))(OrgsOps.create)
    quotas = _method(_rec(Record))(OrgsOps.quotas)
    set_quotas = _method(_rec(Record))(OrgsOps.set_quotas)


class AsyncProjects:
    def __init__(self, c: AsyncRunner) -> None:
        self._c = c
        self._ops = ProjectsOps(c.core)

    create = _method(_rec(Project))(ProjectsOps.create)
    list = _method(_recs(Project))(ProjectsOps.list)


class AsyncTemplates:
    def __init__(self, c: AsyncRunner) -> None:
        self._c = c
        self._ops = TemplatesOps(c.core)

    get = _method(_rec(Record))(TemplatesOps.get)
    list = _method(_recs(Record))(TemplatesOps.list)
    create = _method(_rec(Record))(TemplatesOps.create)
    upload = _method(_rec(Record))(TemplatesOps.upload)
    get_build = _method(_rec(Record))(TemplatesOps.get_build)
    logs = _method(_same)(TemplatesOps.logs)
    wait_build = _method(_rec(Record))(TemplatesOps.wait_build)
    versions = _method(_recs(Record))(TemplatesOps.versions)
    delete = _method(_same)(TemplatesOps.delete)
    delete_version = _method(_none)(TemplatesOps.delete_version)
    set_registry_credential = _method(_rec(Record))(TemplatesOps.set_registry_credential)
    registry_credentials = _method(_recs(Record))(TemplatesOps.registry_credentials)
    delete_registry_credential = _method(_none)(TemplatesOps.delete_registry_credential)


class AsyncPlatinum:
    """The asyncio client: the same surface as Platinum, every call a
    coroutine (``await client.sandboxes.create(...)``). Use ``async with``,
    or ``await client.aclose()``."""

    def __init__(
        self,
        token: str | None = None,
        api_url: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        poll_interval: float = 0.5,
        idempotency_keys: bool = True,
        user_agent: str | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        core = Core(token=token, api_url=api_url, timeout=timeout, max_retries=max_retries,
                    poll_interval=poll_interval, idempotency_keys=idempotency_keys, user_agent=user_agent)
        self._own_http = http_client is None
        self._c = AsyncRunner(core, http_client or httpx.AsyncClient())
        self.sandboxes = AsyncSandboxes(self._c)
        self.snapshots = AsyncSnapshots(self._c)
        self.artifacts = AsyncArtifacts(self._c)
        self.orgs = AsyncOrgs(self._c)
        self.templates = AsyncTemplates(self._c)
        self.projects = AsyncProjects(self._c)

    @property
    def api_url(self) -> str:
        return self._c.core.api_url

    async def health(self, *, timeout: float | None = None) -> None:
        await self._c.run(_ops.health(self._c.core, timeout=timeout))

    async def aclose(self) -> None:
        if self._own_http:
            await self._c.http.aclose()

    async def __aenter__(self) -> "AsyncPlatinum":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
