"""The blocking client, :class:`Platinum`: runs the shared operations with
httpx's sync client."""

from __future__ import annotations

import builtins
import functools
import time
from functools import cached_property
from typing import IO, Any, Callable, Concatenate, Iterable, Iterator, Mapping, ParamSpec, Sequence, TypeVar

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
from ._streams import ByteStream, ExecStream, Sink
from ._transport import BaseRunner, reply, transport_error

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")

CHUNK = 64 << 10


class Runner(BaseRunner[httpx.Client]):
    """Runs operations with blocking I/O on one httpx.Client."""

    def _send(self, r: Req) -> Reply:
        return reply(r, self.http.send(self._request(r), stream=r.stream))

    def run(self, op: Op[T]) -> T:
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
                    value = self._send(step)
                except httpx.TransportError as e:
                    exc = transport_error(step, e)
            elif isinstance(step, Sleep):
                if step.seconds > 0:
                    time.sleep(step.seconds)
            elif isinstance(step, ReadBody):
                resp: httpx.Response = step.reply.raw
                try:
                    buf = bytearray()
                    for chunk in resp.iter_bytes():
                        buf += chunk
                        if step.limit is not None and len(buf) >= step.limit:
                            break
                    value = bytes(buf)
                except httpx.HTTPError as e:
                    exc = APIConnectionError(f"reading the answer: {e}")
                finally:
                    resp.close()
            elif isinstance(step, Close):
                step.reply.raw.close()


def _method(conv: Callable[[Any, R], T]) -> Callable[[Callable[Concatenate[Any, P], Op[R]]],
                                                     Callable[Concatenate[Any, P], T]]:
    """Makes a blocking method of an operation: it runs ``op(self._ops, …)``
    and converts the result with ``conv(self, result)``."""

    def deco(f: Callable[Concatenate[Any, P], Op[R]]) -> Callable[Concatenate[Any, P], T]:
        @functools.wraps(f)
        def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return conv(self, self._c.run(f(self._ops, *args, **kwargs)))

        return method

    return deco


def _sandbox(self: Any, d: Mapping[str, Any]) -> "Sandbox":
    return Sandbox(self._c, d)


def _sandboxes(self: Any, ds: Iterable[Mapping[str, Any]]) -> builtins.list["Sandbox"]:
    return [Sandbox(self._c, d) for d in ds]


def _page(self: Any, d: Mapping[str, Any]) -> "SandboxPage":
    return SandboxPage({**d, "rows": [Sandbox(self._c, r) for r in d.get("rows") or []]})


def _update(self: "Sandbox", d: Mapping[str, Any]) -> "Sandbox":
    self._data = dict(d)
    return self


def _exec_stream(_: Any, reply: Reply) -> ExecStream:
    return ExecStream(reply)


def _fork(self: Any, d: Mapping[str, Any]) -> Record:
    return Record({**d, "sandboxes": [Sandbox(self._c, s) for s in d.get("sandboxes") or []]})


class SandboxPage(Page["Sandbox"]):
    """One page of a sandbox list: ``page["rows"]`` (handles, newest first),
    and ``page["total"]`` when asked with ``paginated=True``."""

    __slots__ = ()


class Commands:
    """``sbx.commands.run(cmd)``: run a command and get its result."""

    def __init__(self, c: Runner, ops: SandboxOps) -> None:
        self._c = c
        self._ops = ops

    run = _method(_rec(ExecResult))(SandboxOps.exec)


class Files:
    """Files in one sandbox: read and write text, bytes or streams; list,
    mkdir, remove. Transfers stream in chunks, never the whole body in
    memory (``read``/``read_bytes`` return it whole, by asking)."""

    def __init__(self, c: Runner, id: str) -> None:
        self._c = c
        self._ops = FilesOps(c.core, id)

    def read_stream(self, path: str, *, chunk_size: int = CHUNK, timeout: float | None = None) -> ByteStream:
        """The file's content as an iterator of chunks; use it in a ``with``
        block or exhaust it. A directory raises IsADirectoryError."""
        return ByteStream(self._c.run(self._ops.open(path, timeout=timeout)), chunk_size)

    def read_bytes(self, path: str, *, timeout: float | None = None) -> bytes:
        with self.read_stream(path, timeout=timeout) as s:
            return b"".join(s)

    def read(self, path: str, *, encoding: str = "utf-8", timeout: float | None = None) -> str:
        """The file's content as text."""
        return self.read_bytes(path, timeout=timeout).decode(encoding)

    def write(self, path: str, data: str | bytes | IO[bytes] | Iterable[bytes], *,
              idempotency_key: str | None = None, timeout: float | None = None) -> Record:
        """Creates or replaces the file with ``data``: text (UTF-8), bytes, a
        binary file object or an iterable of chunks (both streamed as they
        are read). Parent directories are created."""
        content: Any
        rewindable = isinstance(data, (str, bytes))
        if isinstance(data, str):
            content = data.encode()
        elif isinstance(data, (bytes, bytearray, memoryview)):
            content = bytes(data)
            rewindable = True
        elif hasattr(data, "read"):
            f = data

            def chunks() -> Iterator[bytes]:
                while chunk := f.read(CHUNK):
                    yield chunk

            content = chunks()
        else:
            content = iter(data)
        return Record(self._c.run(self._ops.write(path, content, rewindable=rewindable,
                                                  idempotency_key=idempotency_key, timeout=timeout)))

    list = _method(_recs(FileEntry))(FilesOps.list)
    mkdir = _method(_same)(FilesOps.mkdir)
    remove = _method(_none)(FilesOps.remove)


class ProcessStream(ExecStream):
    """A process's output (see ExecStream), with calls to its stdin, signals
    and PTY. Closing the stream does not end the process."""

    def __init__(self, reply: Reply, procs: "Processes", pid: int | None = None) -> None:
        super().__init__(reply)
        self._procs = procs
        if pid is not None:
            self._st.pid = pid
        else:
            first = self._pull()  # the start event names the pid
            if first is not None and first.type != "start":
                self._pending.insert(0, first)

    def _need_pid(self) -> int:
        if self.pid is None:
            raise PlatinumError("the process stream has no pid")
        return self.pid

    def send_input(self, data: str | bytes | None = None, *, eof: bool = False,
                   timeout: float | None = None) -> None:
        self._procs.send_input(self._need_pid(), data, eof=eof, timeout=timeout)

    def signal(self, signal: str = "SIGTERM", *, timeout: float | None = None) -> None:
        self._procs.signal(self._need_pid(), signal, timeout=timeout)

    def resize(self, cols: int, rows: int, *, timeout: float | None = None) -> None:
        self._procs.resize(self._need_pid(), cols, rows, timeout=timeout)

    def kill(self, *, timeout: float | None = None) -> None:
        self._procs.kill(self._need_pid(), timeout=timeout)

    def close_stdin(self, *, timeout: float | None = None) -> None:
        """Closes the process's stdin (Ctrl-D on a PTY)."""
        self.send_input(eof=True, timeout=timeout)

    def disconnect(self) -> None:
        """Stops reading the output; the process keeps running."""
        self.close()


class Processes:
    """Processes in one sandbox: start (in the background, or with streamed
    output), connect to a running one, send input, signal, resize a PTY."""

    def __init__(self, c: Runner, id: str) -> None:
        self._c = c
        self._ops = ProcessesOps(c.core, id)

    start = _method(_rec(Process))(ProcessesOps.start)
    list = _method(_recs(Process))(ProcessesOps.list)
    send_input = _method(_none)(ProcessesOps.send_input)
    signal = _method(_none)(ProcessesOps.signal)
    resize = _method(_none)(ProcessesOps.resize)
    kill = _method(_none)(ProcessesOps.kill)

    def start_stream(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: str | None = None, tag: str | None = None, stdin: bool = False,
                     pty: tuple[int, int] | None = None, timeout_ms: int | None = None,
                     timeout: float | None = None) -> ProcessStream:
        """Starts a process and streams its output from the first byte
        (``pty=(cols, rows)`` gives it a terminal, whose output arrives as
        ``pty`` events)."""
        reply = self._c.run(self._ops.start_stream(cmd, env=env, cwd=cwd, tag=tag, stdin=stdin, pty=pty,
                                                   timeout_ms=timeout_ms, timeout=timeout))
        return ProcessStream(reply, self)

    def connect(self, pid: int, *, timeout: float | None = None) -> ProcessStream:
        """Streams a running process's output from now on."""
        return ProcessStream(self._c.run(self._ops.connect(pid, timeout=timeout)), self, pid)


class CodeContexts:
    """The code interpreter's contexts in one sandbox (``sbx.code_contexts``):
    each one kernel whose state persists across cells."""

    def __init__(self, c: Runner, id: str) -> None:
        self._c = c
        self._ops = CodeOps(c.core, id)

    create = _method(_rec(CodeContext))(CodeOps.create_context)
    list = _method(_recs(CodeContext))(CodeOps.list_contexts)
    restart = _method(_none)(CodeOps.restart_context)
    interrupt = _method(_same)(CodeOps.interrupt_context)
    delete = _method(_none)(CodeOps.delete_context)


class Preview:
    """Preview URLs of the sandbox's ports."""

    def __init__(self, c: Runner, id: str) -> None:
        self._c = c
        self._ops = PreviewOps(c.core, id)

    url = _method(_rec(PreviewURL))(PreviewOps.url)
    set_public = _method(_rec(PreviewURL))(PreviewOps.set_public)
    revoke = _method(_none)(PreviewOps.revoke)


class Artifacts:
    """Artifacts: files exported out of sandboxes, kept after they go."""

    def __init__(self, c: Runner, sandbox_id: str | None = None) -> None:
        self._c = c
        self._ops = ArtifactsOps(c.core, sandbox_id)

    create = _method(_rec(Artifact))(ArtifactsOps.create)
    get = _method(_rec(Artifact))(ArtifactsOps.get)
    delete = _method(_none)(ArtifactsOps.delete)

    def read_stream(self, id: str, *, chunk_size: int = CHUNK, timeout: float | None = None) -> ByteStream:
        return ByteStream(self._c.run(self._ops.open(id, timeout=timeout)), chunk_size)

    def read_bytes(self, id: str, *, timeout: float | None = None) -> bytes:
        with self.read_stream(id, timeout=timeout) as s:
            return b"".join(s)

    list = _method(_recs(Artifact))(ArtifactsOps.list)


class Sandbox(SandboxFields):
    """A handle on one sandbox: its record as last read (``sbx.id``,
    ``sbx["state"]``) and every call on it. Calls that answer with the
    sandbox refresh the record in place and return the handle."""

    def __init__(self, c: Runner, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self._c = c
        self._ops = SandboxOps(c.core, str(data.get("id", "")))

    @cached_property
    def files(self) -> Files:
        return Files(self._c, self.id)

    @cached_property
    def processes(self) -> Processes:
        return Processes(self._c, self.id)

    @cached_property
    def commands(self) -> Commands:
        return Commands(self._c, self._ops)

    @cached_property
    def code_contexts(self) -> CodeContexts:
        return CodeContexts(self._c, self.id)

    @cached_property
    def preview(self) -> Preview:
        return Preview(self._c, self.id)

    @cached_property
    def artifacts(self) -> Artifacts:
        return Artifacts(self._c, self.id)

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

    def run_code(self, code: str, *, language: str | None = None, context: str | CodeContext | None = None,
                 env: Mapping[str, str] | None = None, cwd: str | None = None, timeout_ms: int | None = None,
                 on_stdout: OnText | None = None, on_stderr: OnText | None = None,
                 on_result: OnResult | None = None, on_error: OnError | None = None,
                 timeout: float | None = None) -> Execution:
        """Runs a cell in the sandbox's code interpreter (template
        ``code-interpreter``): ``python`` by default, in the language's
        default context unless ``context`` names one; state persists across
        cells of a context. Output streams to the callbacks as it is
        produced. The cell's own error is ``execution.error``, not raised.
        ``timeout_ms`` interrupts the cell and keeps the context (error
        ``TimeoutError``); ``timeout`` bounds the call."""
        reply = self._c.run(CodeOps(self._c.core, self.id).run(
            code, language=language, context=context, env=env, cwd=cwd, timeout_ms=timeout_ms, timeout=timeout))
        fold = CodeFold(on_stdout, on_stderr, on_result, on_error)
        resp: httpx.Response = reply.raw
        try:
            for line in resp.iter_lines():
                if (ex := fold.line(line)) is not None:
                    return ex
        except httpx.HTTPError as e:
            raise StreamEndedError(f"the code stream broke before the cell ended: {e}") from e
        finally:
            resp.close()
        raise StreamEndedError("the code stream ended without an end event")

    def exec_stream(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                    cwd: str | None = None, timeout_ms: int | None = None, stdin: str | None = None,
                    timeout: float | None = None) -> ExecStream:
        """Runs a command and streams its output as it is produced (iterate
        the events, or ``.wait(on_stdout=…)``). Closing the stream before
        the end kills the command."""
        return ExecStream(self._c.run(self._ops.exec_stream(cmd, env=env, cwd=cwd, timeout_ms=timeout_ms,
                                                            stdin=stdin, timeout=timeout)))

    def exec(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
             timeout_ms: int | None = None, stdin: str | None = None, on_stdout: Sink | None = None,
             on_stderr: Sink | None = None, timeout: float | None = None) -> ExecResult:
        """Runs a command (an argv list, or a string run by ``sh -c``) and
        returns its exit code (a non-zero exit is not an error) and output.
        With ``on_stdout`` / ``on_stderr`` the output is streamed to them as
        the command produces it and not collected. ``timeout_ms`` kills the
        command (``timed_out``); ``timeout`` bounds the call."""
        if on_stdout is None and on_stderr is None:
            return ExecResult(self._c.run(self._ops.exec(cmd, env=env, cwd=cwd, timeout_ms=timeout_ms, stdin=stdin,
                                                         timeout=timeout)))
        s = self.exec_stream(cmd, env=env, cwd=cwd, timeout_ms=timeout_ms, stdin=stdin, timeout=timeout)
        return s.wait(on_stdout, on_stderr, collect=False)

    def preview_url(self, port: int, *, expires_in: int | None = None, timeout: float | None = None) -> PreviewURL:
        """The URL that reaches ``port`` in the sandbox (``preview.url``)."""
        return self.preview.url(port, expires_in=expires_in, timeout=timeout)


class Sandboxes:
    """``client.sandboxes``: create, list, get and manage sandboxes."""

    def __init__(self, c: Runner) -> None:
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

    def connect(self, id: str, *, timeout: float | None = None) -> Sandbox:
        """A handle on an existing sandbox (it checks that it exists; it does
        not start a stopped one)."""
        return Sandbox(self._c, self._c.run(self._ops.get(id, timeout=timeout)))

    def iter(self, *, state: str | None = None, limit: int | None = None, offset: int | None = None,
             parent_id: str | None = None, roots_only: bool | None = None,
             metadata: Mapping[str, str] | None = None, project_id: str | None = None,
             include: Sequence[str] | None = None, timeout: float | None = None) -> Iterator[Sandbox]:
        """Every sandbox matching the filters, newest first, fetching pages
        of ``limit`` (default 100, at most 200) as the loop consumes them.
        Pages are separate reads: sandboxes created or deleted meanwhile can
        shift between pages."""
        size = min(limit or 100, 200)
        off = offset or 0
        while True:
            page = self._c.run(self._ops.list(state=state, limit=size, offset=off, parent_id=parent_id,
                                              roots_only=roots_only, metadata=metadata, project_id=project_id,
                                              include=include, timeout=timeout))
            rows = page["rows"]
            for r in rows:
                yield Sandbox(self._c, r)
            if len(rows) < size:
                return
            off += len(rows)

    list = _method(_page)(SandboxesOps.list)


class Snapshots:
    """``client.snapshots``: snapshots and backups by id."""

    def __init__(self, c: Runner) -> None:
        self._c = c
        self._ops = SnapshotsOps(c.core)

    get = _method(_rec(Snapshot))(SnapshotsOps.get)
    delete = _method(_none)(SnapshotsOps.delete)
    wait = _method(_rec(Snapshot))(SnapshotsOps.wait)


class Orgs:
    """``client.orgs``: organizations and their quotas (admin token)."""

    def __init__(self, c: Runner) -> None:
        self._c = c
        self._ops = OrgsOps(c.core)

    create = _method(_rec(Record))(OrgsOps.create)
    quotas = _method(_rec(Record))(OrgsOps.quotas)
    set_quotas = _method(_rec(Record))(OrgsOps.set_quotas)


class Projects:
    def __init__(self, c: Runner) -> None:
        self._c = c
        self._ops = ProjectsOps(c.core)

    create = _method(_rec(Project))(ProjectsOps.create)
    list = _method(_recs(Project))(ProjectsOps.list)


class Templates:
    def __init__(self, c: Runner) -> None:
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


class Platinum:
    """The blocking client.

    ``token`` and ``api_url`` default to ``PT_TOKEN`` and ``PT_API_URL``.
    ``timeout`` is the default per-request timeout in seconds (calls that
    wait — for a state, a command, a stream — take their own ``timeout=``);
    ``max_retries`` bounds the retries of a call that ptd answered with
    "try again" (429/503 with Retry-After, 502/504, a dropped connection).
    Use it as a context manager, or call ``close()``, to release its
    connections.
    """

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
        http_client: httpx.Client | None = None,
    ) -> None:
        core = Core(token=token, api_url=api_url, timeout=timeout, max_retries=max_retries,
                    poll_interval=poll_interval, idempotency_keys=idempotency_keys, user_agent=user_agent)
        self._own_http = http_client is None
        self._c = Runner(core, http_client or httpx.Client())
        self.sandboxes = Sandboxes(self._c)
        self.snapshots = Snapshots(self._c)
        self.artifacts = Artifacts(self._c)
        self.orgs = Orgs(self._c)
        self.templates = Templates(self._c)
        self.projects = Projects(self._c)

    @property
    def api_url(self) -> str:
        return self._c.core.api_url

    def health(self, *, timeout: float | None = None) -> None:
        """Checks that ptd answers (no token needed)."""
        self._c.run(_ops.health(self._c.core, timeout=timeout))

    def close(self) -> None:
        if self._own_http:
            self._c.http.close()

    def __enter__(self) -> "Platinum":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
