"""Records: API objects readable as attributes and as items.

A record keeps the JSON object ptd answered with. Known fields are typed
attributes (``sbx.id``, ``sbx.state``); every field, including ones newer
than this SDK, is an item (``parent["id"]``), and records are read-only
mappings (``dict(rec)``, ``rec.get("name")``).
"""

from __future__ import annotations

import base64
from typing import Any, Generic, Iterator, Mapping, TypeVar, overload

T = TypeVar("T")

__all__ = [
    "Record",
    "SandboxFields",
    "ExecResult",
    "ExecEvent",
    "FileEntry",
    "EnvResult",
    "ResizeResult",
    "Metrics",
    "Usage",
    "Snapshot",
    "PreviewURL",
    "NetworkResult",
    "Process",
    "Artifact",
]


class Record(Mapping[str, Any]):
    """A read-only mapping of one API object, with typed attributes for the
    fields this SDK knows."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def to_dict(self) -> dict[str, Any]:
        """A plain copy of the record's JSON object."""
        return dict(self._data)


def str_member(d: Mapping[str, Any], key: str) -> str | None:
    """``d[key]`` when it is a string, else None: how optional members of
    an answer (an error's ``field``, a result's ``text/plain``) are read."""
    v = d.get(key)
    return v if isinstance(v, str) else None


def int_member(d: Mapping[str, Any], key: str) -> int | None:
    """``d[key]`` as an int when it is a number, else None."""
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) else None


def float_member(d: Mapping[str, Any], key: str) -> float | None:
    """``d[key]`` as a float when it is a number, else None."""
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def dict_member(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A copy of ``d[key]`` when it is an object, else an empty dict."""
    v = d.get(key)
    return dict(v) if isinstance(v, dict) else {}


class field(Generic[T]):
    """A typed attribute reading one key of a record (default when absent or
    null)."""

    def __init__(self, default: T, key: str | None = None) -> None:
        self.default = default
        self.key = key or ""

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.key:
            self.key = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> "field[T]": ...
    @overload
    def __get__(self, obj: Record, owner: type | None = None) -> T: ...
    def __get__(self, obj: Record | None, owner: type | None = None) -> "T | field[T]":
        if obj is None:
            return self
        v = obj._data.get(self.key)
        if v is None:
            d = self.default
            # A fresh empty list or dict, so callers cannot change the default.
            return type(d)() if isinstance(d, (list, dict)) else d  # type: ignore[return-value]
        return v  # type: ignore[no-any-return]


H = TypeVar("H")


class Page(Record, Generic[H]):
    """One page of a list of handles (``page["rows"]``), with
    ``page["total"]`` when it was asked for: SandboxPage and
    AsyncSandboxPage are its sync and async sandbox forms."""

    __slots__ = ()

    @property
    def rows(self) -> list[H]:
        return list(self._data["rows"])

    @property
    def data(self) -> list[H]:
        """The rows under the name other SDKs use."""
        return self.rows

    @property
    def total(self) -> int | None:
        v = self._data.get("total")
        return int(v) if v is not None else None


class SandboxFields(Record):
    """The fields of a sandbox record. Times are ISO 8601 strings as ptd
    sends them; ``None`` where the sandbox has none."""

    __slots__ = ()

    id: field[str] = field("")
    name: field[str | None] = field(None)
    state: field[str] = field("")
    #: status (``ready``, ``running``, ``idle``, ``expiring``, ``destroyed``, …).
    status: field[str] = field("")
    template: field[str] = field("")
    template_id: field[str] = field("")
    template_slug: field[str] = field("")
    template_version: field[int] = field(0)
    template_version_id: field[str] = field("")
    cpu: field[float] = field(0.0)
    ram_mb: field[int] = field(0)
    disk_gb: field[int] = field(0)
    env_keys: field[list[str]] = field([])
    metadata: field[dict[str, str]] = field({})
    org_id: field[str] = field("")
    project_id: field[str] = field("")
    host_id: field[str | None] = field(None)
    parent_id: field[str | None] = field(None)
    auto_resume: field[bool] = field(True)
    reason: field[str | None] = field(None)
    type: field[str] = field("")
    auto_stop_minutes: field[int] = field(0)
    auto_archive_days: field[int] = field(0)
    auto_delete_days: field[int] = field(0)
    ttl_ms: field[int | None] = field(None)
    expires_at: field[str | None] = field(None)
    created_at: field[str] = field("")
    updated_at: field[str] = field("")
    deleted_at: field[str | None] = field(None)
    deleted_reason: field[str | None] = field(None)
    destroyed_at: field[str | None] = field(None)
    destroyed_reason: field[str | None] = field(None)
    #: What the latest start brought back (``memory`` or ``disk_only``): the
    #: record's ``restore`` item (``restore`` is the snapshot call on handles).
    last_restore: field[str | None] = field(None, "restore")
    ram_restored: field[bool | None] = field(None)
    #: How the create got the sandbox running: ``warm`` (its template's warm
    #: pool booted it ahead) or ``cold``; the record's ``start`` item
    #: (``start`` is the lifecycle call on handles).
    start_kind: field[str | None] = field(None, "start")
    #: Where a stopped or archived sandbox may start: ``any_host`` (its disk
    #: is in the object store) or ``own_host`` (only ``host_id`` has it).
    starts_on: field[str | None] = field(None)
    secret_names: field[list[str]] = field([])
    network: field[dict[str, Any] | None] = field(None)
    progress: field[dict[str, Any] | None] = field(None)


class ExecResult(Record):
    """A finished command: its exit code (-1 when killed by a signal) and
    output."""

    __slots__ = ()
    exit_code: field[int] = field(0)
    stdout: field[str] = field("")
    stderr: field[str] = field("")
    timed_out: field[bool] = field(False)
    duration_ms: field[int] = field(0)


class ExecEvent(Record):
    """One event of a streamed command: ``start`` (``pid``), ``stdout`` /
    ``stderr`` (``data``), ``pty`` (``data_b64``), ``exit`` (``exit_code``,
    ``timed_out``) or ``error``."""

    __slots__ = ()
    type: field[str] = field("")
    pid: field[int] = field(0)
    data: field[str] = field("")
    data_b64: field[str] = field("")
    exit_code: field[int] = field(0)
    timed_out: field[bool] = field(False)

    @property
    def bytes(self) -> bytes:
        """The event's output as bytes: a PTY's decoded, else data's UTF-8."""
        if self._data.get("data_b64"):
            return base64.b64decode(self._data["data_b64"])
        return self.data.encode()


class FileEntry(Record):
    __slots__ = ()
    name: field[str] = field("")
    path: field[str] = field("")
    #: ``file``, ``dir`` or ``symlink``.
    type: field[str] = field("")
    size: field[int] = field(0)
    mode: field[str] = field("")
    modified_at: field[str] = field("")


class EnvResult(Record):
    """What a set_env did: the key names now set (never the values) and when
    the change applies (``next_exec`` or ``next_start``)."""

    __slots__ = ()
    id: field[str] = field("")
    state: field[str] = field("")
    env_keys: field[list[str]] = field([])
    applies: field[str] = field("")


class ResizeResult(Record):
    __slots__ = ()
    id: field[str] = field("")
    state: field[str] = field("")
    cpu: field[float] = field(0.0)
    ram_mb: field[int] = field(0)
    disk_gb: field[int] = field(0)
    #: ``now``, ``next_start`` or ``pending``.
    applies_at: field[str] = field("")
    partial: field[bool] = field(False)
    requested: field[dict[str, Any]] = field({})
    live: field[dict[str, Any] | None] = field(None)


class Metrics(Record):
    __slots__ = ()
    cpu_percent: field[float] = field(0.0)
    memory_used_bytes: field[int] = field(0)
    memory_limit_bytes: field[int] = field(0)
    disk_used_bytes: field[int] = field(0)
    disk_size_bytes: field[int] = field(0)
    net_rx_bytes: field[int] = field(0)
    net_tx_bytes: field[int] = field(0)
    pids: field[int] = field(0)
    at: field[str] = field("")


class Usage(Record):
    __slots__ = ()
    id: field[str] = field("")
    cpu_seconds: field[float] = field(0.0)
    ram_gb_seconds: field[float] = field(0.0)
    storage_gb_hours: field[float] = field(0.0)
    periods: field[list[dict[str, Any]]] = field([])


class Snapshot(Record):
    """A snapshot or backup (``kind``), ``creating`` until ``ready``."""

    __slots__ = ()
    id: field[str] = field("")
    kind: field[str] = field("")
    sandbox_id: field[str] = field("")
    name: field[str | None] = field(None)
    state: field[str] = field("")
    memory: field[bool] = field(False)
    size_bytes: field[int] = field(0)
    reason: field[str | None] = field(None)
    created_at: field[str] = field("")


class PreviewURL(Record):
    __slots__ = ()
    sandbox_id: field[str] = field("")
    port: field[int] = field(0)
    url: field[str] = field("")
    path_url: field[str] = field("")
    browser_url: field[str] = field("")
    token: field[str] = field("")
    public: field[bool] = field(False)
    expires_at: field[str | None] = field(None)


class NetworkResult(Record):
    __slots__ = ()
    id: field[str] = field("")
    state: field[str] = field("")
    network: field[dict[str, Any]] = field({})
    #: ``now`` or ``next_start``.
    applies: field[str] = field("")


class Process(Record):
    """A background process in a sandbox."""

    __slots__ = ()
    pid: field[int] = field(0)
    tag: field[str | None] = field(None)
    cmd: field[list[str]] = field([])
    cwd: field[str | None] = field(None)
    pty: field[bool] = field(False)
    #: Its stdin is open for input (always for a PTY).
    stdin: field[bool] = field(False)


class Project(Record):
    """A project of the organization (``prj_…``); ``default`` is where
    creates without ``project_id`` go."""

    __slots__ = ()
    id: field[str] = field("")
    org_id: field[str] = field("")
    name: field[str] = field("")
    default: field[bool] = field(False)
    created_at: field[str] = field("")


class Artifact(Record):
    __slots__ = ()
    id: field[str] = field("")
    sandbox_id: field[str] = field("")
    name: field[str] = field("")
    path: field[str] = field("")
    kind: field[str] = field("")
    content_type: field[str] = field("")
    size_bytes: field[int] = field(0)
    sha256: field[str] = field("")
    created_at: field[str] = field("")
