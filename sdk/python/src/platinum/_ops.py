"""Every API call, once, as an operation (see ``_core``).

Operations return plain JSON values; the sync and async layers turn them
into records and handles.
"""

from __future__ import annotations

import base64
import builtins
import json
from typing import Any, Mapping, Sequence

from ._core import (
    DEFAULT_SERVER_WAIT,
    FOREVER,
    MAX_SERVER_WAIT,
    Close,
    ReadBody,
    WAIT_GRACE,
    Core,
    Deadline,
    Op,
    Reply,
    Sleep,
    bool_param,
    seg,
    want_dict,
)
from ._errors import APITimeoutError, PlatinumError, SandboxFailedError, SandboxStateError, WaitTimeoutError


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()

# Settled states: a wait that sees one of these other than its goal is over.
_SETTLED = frozenset({"running", "stopped", "archived", "failed", "deleting", "deleted"})


def sandbox_path(id: str) -> str:
    return "/v1/sandboxes/" + seg(id)


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class _Goal:
    """When a wait for ``want`` is over."""

    def __init__(self, want: str, *, lifecycle: bool) -> None:
        self.want = want
        self.lifecycle = lifecycle
        self.include_deleted = lifecycle or want == "deleted"

    def reached(self, sb: Mapping[str, Any]) -> bool:
        st = sb.get("state")
        if self.want == "stopped" and self.lifecycle:
            if st in ("stopped", "archived"):
                return True  # archived is stopped and more
            # An ephemeral sandbox is deleted when it stops.
            return st in ("deleting", "deleted") and sb.get("type") == "ephemeral" and \
                sb.get("deleted_reason") == "auto_deleted"
        return st == self.want

    def hopeless(self, sb: Mapping[str, Any]) -> bool:
        st = sb.get("state")
        if self.lifecycle:
            return st in _SETTLED and not self.reached(sb)
        if st == "failed" or st == "deleted":
            return True
        return st == "deleting" and self.want != "deleted"


def _wait_params(state: str, wait_timeout_ms: int | None, dl: Deadline) -> tuple[list[tuple[str, str]], float]:
    """The wait_for_state query of a server-side wait, and the HTTP timeout
    that lets it run out: the caller's wait_timeout_ms, else what is left of
    the call's deadline (at most ptd's 10 minutes), else ptd's default."""
    params = [("wait_for_state", state)]
    if wait_timeout_ms is not None:
        secs = wait_timeout_ms / 1000
    elif dl.at is not None:
        secs = min(dl.remaining() or 0.001, MAX_SERVER_WAIT)
    else:
        secs = None
    if secs is not None:
        ms = max(1, min(int(secs * 1000), int(MAX_SERVER_WAIT * 1000)))
        params.append(("wait_timeout_ms", str(ms)))
        return params, ms / 1000 + WAIT_GRACE
    return params, DEFAULT_SERVER_WAIT + WAIT_GRACE


class SandboxesOps:
    """Calls on sandboxes by id (``client.sandboxes``)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def create(
        self,
        *,
        template: str | None = None,
        template_version_id: str | None = None,
        cpu: float | None = None,
        ram_mb: int | None = None,
        disk_gb: int | None = None,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        ttl_ms: int | None = None,
        project_id: str | None = None,
        parent_id: str | None = None,
        auto_resume: bool | None = None,
        runtime: str | None = None,
        type: str | None = None,
        auto_stop_minutes: int | None = None,
        auto_archive_days: int | None = None,
        auto_delete_days: int | None = None,
        from_snapshot: str | None = None,
        from_backup: str | None = None,
        secrets: Mapping[str, Mapping[str, Any]] | None = None,
        network: Mapping[str, Any] | None = None,
        gpus: int | None = None,
        region: str | None = None,
        wait_for_running: bool = False,
        wait_timeout_ms: int | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> Op[dict[str, Any]]:
        """Creates a sandbox. Only ``template`` is usually given; every other
        field of the create body is a keyword of the same name. With
        ``wait_for_running`` it returns once the sandbox runs: the server
        waits (``wait_timeout_ms``, else what is left of ``timeout``), and
        if that runs out (a 202) the client polls the same sandbox until it
        runs or ``timeout`` passes (WaitTimeoutError) — it never creates a
        second one. A failed provisioning raises SandboxFailedError."""
        body = _drop_none({
            "template": template, "template_version_id": template_version_id, "cpu": cpu, "ram_mb": ram_mb,
            "disk_gb": disk_gb, "name": name, "env": dict(env) if env is not None else None,
            "metadata": dict(metadata) if metadata is not None else None, "ttl_ms": ttl_ms,
            "project_id": project_id, "parent_id": parent_id, "auto_resume": auto_resume, "runtime": runtime,
            "type": type, "auto_stop_minutes": auto_stop_minutes, "auto_archive_days": auto_archive_days,
            "auto_delete_days": auto_delete_days, "from_snapshot": from_snapshot, "from_backup": from_backup,
            "secrets": {k: dict(v) for k, v in secrets.items()} if secrets is not None else None,
            "network": dict(network) if network is not None else None, "gpus": gpus, "region": region,
        })
        dl = Deadline(timeout)
        params: list[tuple[str, str]] = []
        http_timeout = None
        if wait_for_running:
            params, http_timeout = _wait_params("running", wait_timeout_ms, dl)
        sb = want_dict((yield from self.core.call(
            "POST", "/v1/sandboxes", body, params=params, deadline=dl, http_timeout=http_timeout,
            idempotency_key=idempotency_key)))
        if not wait_for_running or sb.get("state") == "running":
            return sb
        # The server's wait ran out (202 wait_timed_out): the body names the
        # sandbox, so poll it by id; never create again.
        return (yield from self.wait_until(str(sb["id"]), _Goal("running", lifecycle=False), dl, sb))

    def list(
        self,
        *,
        state: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        parent_id: str | None = None,
        roots_only: bool | None = None,
        paginated: bool | None = None,
        metadata: Mapping[str, str] | None = None,
        project_id: str | None = None,
        include: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> Op[dict[str, Any]]:
        """One page of the organization's live sandboxes, newest first:
        ``{"rows": [...]}`` (and ``"total"`` with ``paginated=True``).
        Filters combine with AND; ``limit`` is 1..200 (default 50)."""
        if roots_only and parent_id:
            raise PlatinumError("list: pass parent_id or roots_only, not both")
        q: list[tuple[str, str]] = []
        if state is not None:
            q.append(("state", state))
        if parent_id is not None:
            q.append(("parent_id", parent_id))
        if roots_only:
            q.append(("roots_only", "true"))
        for k, v in (metadata or {}).items():
            q.append((f"metadata[{k}]", v))
        if project_id is not None:
            q.append(("project_id", project_id))
        if include:
            q.append(("include", ",".join(include)))
        if limit is not None:
            q.append(("limit", str(limit)))
        if offset is not None:
            q.append(("offset", str(offset)))
        if paginated is not None:
            q.append(("paginated", bool_param(paginated)))
        page = want_dict((yield from self.core.call("GET", "/v1/sandboxes", params=q, deadline=Deadline(timeout))))
        page.setdefault("rows", [])
        if page["rows"] is None:
            page["rows"] = []
        return page

    def get(self, id: str, *, include_deleted: bool = False, timeout: float | None = None) -> Op[dict[str, Any]]:
        """The sandbox's record. Unknown, deleted and other organizations'
        sandboxes raise NotFoundError."""
        q = [("include_deleted", "true")] if include_deleted else []
        return want_dict((yield from self.core.call("GET", sandbox_path(id), params=q, deadline=Deadline(timeout))))

    def children(self, id: str, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        """The sandbox's live children, newest first."""
        out = want_dict((yield from self.core.call("GET", sandbox_path(id) + "/children", deadline=Deadline(timeout))))
        return list(out.get("rows") or [])

    def update(
        self,
        id: str,
        *,
        name: str | None = UNSET,
        auto_resume: bool | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> Op[dict[str, Any]]:
        """Changes the sandbox's name (None clears it) or auto_resume; fields
        not passed are left as they are."""
        body: dict[str, Any] = {}
        if name is not UNSET:
            body["name"] = name or None
        if auto_resume is not None:
            body["auto_resume"] = auto_resume
        if not body:
            raise PlatinumError("update: nothing to change: pass name= or auto_resume=")
        return want_dict((yield from self.core.call(
            "PATCH", sandbox_path(id), body, deadline=Deadline(timeout), idempotency_key=idempotency_key)))

    def set_ttl(self, id: str, ttl_ms: int, *, idempotency_key: str | None = None,
                timeout: float | None = None) -> Op[dict[str, Any]]:
        """Resets the sandbox's expiry to ``ttl_ms`` from now (up to a 24-hour
        session). A destroyed sandbox raises SandboxDestroyedError, a TTL
        over the plan's limit SandboxTTLExceededError."""
        return want_dict((yield from self.core.call(
            "POST", sandbox_path(id) + "/ttl", {"ttl_ms": ttl_ms}, deadline=Deadline(timeout),
            idempotency_key=idempotency_key)))

    def kill(self, id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Destroys the sandbox and returns its destroyed record (status
        ``destroyed``, destroyed_reason ``user_killed``); killing a destroyed
        sandbox returns that record again."""
        return want_dict((yield from self.core.call("POST", sandbox_path(id) + "/kill", deadline=Deadline(timeout))))

    def delete(self, id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Starts deleting the sandbox (state ``deleting``); children are not
        deleted, and a sandbox with live children raises ConflictError whose
        ``children`` names them."""
        return want_dict((yield from self.core.call("DELETE", sandbox_path(id), deadline=Deadline(timeout))))

    def lifecycle(self, id: str, verb: str, target: str, *, wait: bool, wait_timeout_ms: int | None,
                  body: Mapping[str, Any] | None = None, timeout: float | None,
                  idempotency_key: str | None = None) -> Op[dict[str, Any]]:
        """One stop/start/archive/restore call, then an optional wait for
        target: the server's wait first, then polling after a 202."""
        dl = Deadline(timeout)
        params: list[tuple[str, str]] = []
        http_timeout = None
        if wait:
            params, http_timeout = _wait_params(target, wait_timeout_ms, dl)
        try:
            sb = want_dict((yield from self.core.call(
                "POST", sandbox_path(id) + "/" + verb, dict(body) if body is not None else None, params=params,
                deadline=dl, http_timeout=http_timeout, idempotency_key=idempotency_key)))
        except SandboxFailedError as e:
            raise SandboxStateError({**e.sandbox, "id": e.sandbox.get("id", id), "state": "failed"}, target) from e
        if not wait:
            return sb
        return (yield from self.wait_until(id, _Goal(target, lifecycle=True), dl, sb))

    def wait_for_state(self, id: str, state: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Polls the sandbox until it is in ``state``. A sandbox that settles
        elsewhere for good raises SandboxStateError; ``timeout`` passing
        raises WaitTimeoutError."""
        return (yield from self.wait_until(id, _Goal(state, lifecycle=False), Deadline(timeout), None))

    def wait_until(self, id: str, goal: _Goal, dl: Deadline, last: dict[str, Any] | None) -> Op[dict[str, Any]]:
        if last is not None and goal.hopeless(last):
            raise SandboxStateError(last, goal.want)
        while True:
            if last is not None and dl.expired():
                raise WaitTimeoutError(
                    f"sandbox {id} is still {last.get('state')}, not {goal.want}, after {dl.timeout}s", last)
            try:
                sb = yield from self.get(id, include_deleted=goal.include_deleted, timeout=dl.remaining())
            except APITimeoutError:
                if last is None or not dl.expired():
                    raise
                raise WaitTimeoutError(
                    f"sandbox {id} is still {last.get('state')}, not {goal.want}, after {dl.timeout}s", last) from None
            last = sb
            if goal.reached(sb):
                return sb
            if goal.hopeless(sb):
                raise SandboxStateError(sb, goal.want)
            r = dl.remaining()
            if r is not None and r <= 0:
                continue
            yield Sleep(dl.cap(self.core.poll_interval))


def exec_body(cmd: str | Sequence[str], env: Mapping[str, str] | None, cwd: str | None,
              timeout_ms: int | None, stdin: str | None) -> dict[str, Any]:
    if isinstance(cmd, str):
        if not cmd:
            raise PlatinumError("exec: empty command")
        c: Any = cmd
    else:
        c = [str(a) for a in cmd]
        if not c:
            raise PlatinumError("exec: empty command")
    return _drop_none({"cmd": c, "env": dict(env) if env is not None else None, "cwd": cwd,
                       "timeout_ms": timeout_ms, "stdin": stdin})


class SandboxOps:
    """Calls on one sandbox (a handle's methods)."""

    def __init__(self, core: Core, id: str) -> None:
        self.core = core
        self.id = id
        self.svc = SandboxesOps(core)
        self.path = sandbox_path(id)

    def refresh(self, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Reads the sandbox's current record into the handle."""
        return (yield from self.svc.get(self.id, timeout=timeout))

    def exec(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
             timeout_ms: int | None = None, stdin: str | None = None,
             timeout: float | None = None) -> Op[dict[str, Any]]:
        """Runs a command (an argv list, or a string run by ``sh -c``) and
        returns its exit code and whole output. ``timeout_ms`` kills the
        command (``timed_out``); ``timeout`` bounds the call."""
        body = exec_body(cmd, env, cwd, timeout_ms, stdin)
        # The answer comes when the command ends: no read timeout but the
        # call's own (or the command's, plus a grace).
        http_timeout = timeout if timeout is not None else \
            FOREVER if timeout_ms is None else timeout_ms / 1000 + WAIT_GRACE
        return want_dict((yield from self.core.call(
            "POST", self.path + "/exec", body, deadline=Deadline(timeout), http_timeout=http_timeout)))

    def exec_stream(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                    cwd: str | None = None, timeout_ms: int | None = None, stdin: str | None = None,
                    timeout: float | None = None) -> Op[Reply]:
        body = exec_body(cmd, env, cwd, timeout_ms, stdin)
        return (yield from self.core.request(
            "POST", self.path + "/exec", params=[("stream", "true")], json=body, has_json=True,
            headers={"Accept": "application/x-ndjson"}, deadline=Deadline(timeout),
            http_timeout=_stream_timeout(timeout), stream=True))

    def set_env(self, env: Mapping[str, str | None], *, idempotency_key: str | None = None,
                timeout: float | None = None) -> Op[dict[str, Any]]:
        """Merges ``env`` into the sandbox's environment; a None value removes
        that key, keys not named are left alone. New commands see the change
        at once (``applies`` says ``next_exec`` or ``next_start``)."""
        return want_dict((yield from self.core.call(
            "PATCH", self.path + "/env", {"env": dict(env)}, deadline=Deadline(timeout),
            idempotency_key=idempotency_key)))

    def update(self, *, name: str | None = UNSET, auto_resume: bool | None = None,
               idempotency_key: str | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Changes the name (None clears it) or auto_resume."""
        return (yield from self.svc.update(self.id, name=name, auto_resume=auto_resume,
                                           idempotency_key=idempotency_key, timeout=timeout))

    def rename(self, name: str | None, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Gives the sandbox a new name; None clears it."""
        return (yield from self.svc.update(self.id, name=name, timeout=timeout))

    def set_auto_resume(self, on: bool, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Turns auto-resume (a preview request starts a stopped sandbox) on
        or off."""
        return (yield from self.svc.update(self.id, auto_resume=on, timeout=timeout))

    def stop(self, *, wait_for_stopped: bool = False, wait_timeout_ms: int | None = None,
             timeout: float | None = None) -> Op[dict[str, Any]]:
        """Stops the sandbox, keeping its disk (and memory where it can).
        With ``wait_for_stopped`` it returns once stopped."""
        return (yield from self.svc.lifecycle(self.id, "stop", "stopped", wait=wait_for_stopped,
                                              wait_timeout_ms=wait_timeout_ms, timeout=timeout))

    def pause(self, *, wait_for_stopped: bool = False, wait_timeout_ms: int | None = None,
              timeout: float | None = None) -> Op[dict[str, Any]]:
        """stop under the name other sandbox APIs use."""
        return (yield from self.svc.lifecycle(self.id, "pause", "stopped", wait=wait_for_stopped,
                                              wait_timeout_ms=wait_timeout_ms, timeout=timeout))

    def start(self, *, wait_for_running: bool = False, wait_timeout_ms: int | None = None,
              timeout: float | None = None) -> Op[dict[str, Any]]:
        """Starts a stopped, archived or failed sandbox (restoring an
        archived one first). Idempotent. With ``wait_for_running`` it
        returns once running; ``restore`` / ``ram_restored`` say whether
        memory came back."""
        return (yield from self.svc.lifecycle(self.id, "start", "running", wait=wait_for_running,
                                              wait_timeout_ms=wait_timeout_ms, timeout=timeout))

    def resume(self, *, wait_for_running: bool = False, wait_timeout_ms: int | None = None,
               timeout: float | None = None) -> Op[dict[str, Any]]:
        """start under the name other sandbox APIs use."""
        return (yield from self.svc.lifecycle(self.id, "resume", "running", wait=wait_for_running,
                                              wait_timeout_ms=wait_timeout_ms, timeout=timeout))

    def archive(self, *, wait_for_archived: bool = False, wait_timeout_ms: int | None = None,
                timeout: float | None = None) -> Op[dict[str, Any]]:
        """Moves a stopped sandbox's disk to cold storage; start restores it."""
        return (yield from self.svc.lifecycle(self.id, "archive", "archived", wait=wait_for_archived,
                                              wait_timeout_ms=wait_timeout_ms, timeout=timeout))

    def wait_for_state(self, state: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Polls until the sandbox is in ``state``."""
        return (yield from self.svc.wait_for_state(self.id, state, timeout=timeout))

    def resize(self, *, cpu: float | None = None, ram_mb: int | None = None, disk_gb: int | None = None,
               idempotency_key: str | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Changes cpu / ram_mb (live when the host can, else
        SandboxNotResizableError with a ``hint``) or grows disk_gb."""
        body = _drop_none({"cpu": cpu, "ram_mb": ram_mb, "disk_gb": disk_gb})
        if not body:
            raise PlatinumError("resize: nothing to change: pass cpu=, ram_mb= or disk_gb=")
        return want_dict((yield from self.core.call(
            "POST", self.path + "/resize", body, deadline=Deadline(timeout), idempotency_key=idempotency_key)))

    def delete(self, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Starts deleting the sandbox; its children are not deleted."""
        return (yield from self.svc.delete(self.id, timeout=timeout))

    def kill(self, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Destroys the sandbox (status ``destroyed``)."""
        return (yield from self.svc.kill(self.id, timeout=timeout))

    def set_ttl(self, ttl_ms: int, *, idempotency_key: str | None = None,
                timeout: float | None = None) -> Op[dict[str, Any]]:
        """Resets the expiry to ``ttl_ms`` from now."""
        return (yield from self.svc.set_ttl(self.id, ttl_ms, idempotency_key=idempotency_key, timeout=timeout))

    def metrics(self, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Live CPU, memory, disk and network figures."""
        return want_dict((yield from self.core.call("GET", self.path + "/metrics", deadline=Deadline(timeout))))

    def usage(self, *, from_: str | None = None, to: str | None = None,
              timeout: float | None = None) -> Op[dict[str, Any]]:
        """Billed usage between ``from_`` and ``to`` (ISO 8601; default: the
        sandbox's whole life)."""
        q = [(k, v) for k, v in (("from", from_), ("to", to)) if v is not None]
        return want_dict((yield from self.core.call("GET", self.path + "/usage", params=q,
                                                    deadline=Deadline(timeout))))

    def children(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        return (yield from self.svc.children(self.id, timeout=timeout))

    def snapshot(self, *, name: str | None = None, memory: bool | None = None,
                 idempotency_key: str | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Takes a snapshot (disk, and memory where the runtime can)."""
        return want_dict((yield from self.core.call(
            "POST", self.path + "/snapshots", _drop_none({"name": name, "memory": memory}),
            deadline=Deadline(timeout), idempotency_key=idempotency_key)))

    def snapshots(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        out = want_dict((yield from self.core.call("GET", self.path + "/snapshots", deadline=Deadline(timeout))))
        return list(out.get("rows") or [])

    def restore(self, snapshot_id: str, *, wait_for_running: bool = False, wait_timeout_ms: int | None = None,
                timeout: float | None = None) -> Op[dict[str, Any]]:
        """Rolls the sandbox back to one of its snapshots."""
        return (yield from self.svc.lifecycle(self.id, "restore", "running", wait=wait_for_running,
                                              wait_timeout_ms=wait_timeout_ms, body={"snapshot_id": snapshot_id},
                                              timeout=timeout))

    def fork(self, *, count: int = 1, wait: bool = False, parent: bool = True,
             metadata: dict[str, str] | None = None,
             idempotency_key: str | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Makes ``count`` running copies of the sandbox (children of it
        unless ``parent=False``; ``metadata`` set on each over the source's):
        ``{"sandboxes": [...], "memory": ...}``."""
        body: dict[str, Any] = {"count": count, "wait": wait}
        if not parent:
            body["parent"] = False
        if metadata is not None:
            body["metadata"] = metadata
        return want_dict((yield from self.core.call(
            "POST", self.path + "/fork", body, deadline=Deadline(timeout),
            http_timeout=(DEFAULT_SERVER_WAIT + WAIT_GRACE) if wait else None,
            idempotency_key=idempotency_key)))

    def backup(self, *, name: str | None = None, wait: bool = False, idempotency_key: str | None = None,
               timeout: float | None = None) -> Op[dict[str, Any]]:
        """Starts an off-host backup; with ``wait`` returns it once ready."""
        dl = Deadline(timeout)
        snap = want_dict((yield from self.core.call(
            "POST", self.path + "/backups", _drop_none({"name": name}), deadline=dl,
            idempotency_key=idempotency_key)))
        if not wait:
            return snap
        return (yield from SnapshotsOps(self.core).wait(str(snap["id"]), timeout=dl.remaining()))

    def backups(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        out = want_dict((yield from self.core.call("GET", self.path + "/backups", deadline=Deadline(timeout))))
        return list(out.get("rows") or [])

    def set_network(self, *, egress: str | None = None, allow_out: Sequence[str] = (),
                    deny_out: Sequence[str] = (), timeout: float | None = None) -> Op[dict[str, Any]]:
        """Replaces the outbound network policy: ``egress`` ``allow`` or
        ``deny``, with exceptions in ``allow_out`` / ``deny_out`` (CIDRs or
        host names)."""
        body = _drop_none({"egress": egress, "allow_out": list(allow_out), "deny_out": list(deny_out)})
        return want_dict((yield from self.core.call("PATCH", self.path + "/network", body,
                                                    deadline=Deadline(timeout))))


class SnapshotsOps:
    def __init__(self, core: Core) -> None:
        self.core = core

    def get(self, id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        return want_dict((yield from self.core.call("GET", "/v1/snapshots/" + seg(id), deadline=Deadline(timeout))))

    def delete(self, id: str, *, timeout: float | None = None) -> Op[None]:
        yield from self.core.call("DELETE", "/v1/snapshots/" + seg(id), deadline=Deadline(timeout))

    def wait(self, id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Polls a snapshot or backup until it is ready (a failed one raises
        PlatinumError)."""
        dl = Deadline(timeout)
        while True:
            snap = yield from self.get(id, timeout=dl.remaining())
            if snap.get("state") == "ready":
                return snap
            if snap.get("state") == "failed":
                raise PlatinumError(f"{snap.get('kind')} {id} failed: {snap.get('reason')}")
            if dl.expired():
                raise WaitTimeoutError(f"{id} is still {snap.get('state')} after {timeout}s", snap)
            yield Sleep(dl.cap(self.core.poll_interval))


class FilesOps:
    """File calls in one sandbox (``sbx.files``)."""

    def __init__(self, core: Core, id: str) -> None:
        self.core = core
        self.path = sandbox_path(id) + "/files"

    def open(self, path: str, *, timeout: float | None = None) -> Op[Reply]:
        """GET the file, unread (a directory raises IsADirectoryError)."""
        reply = yield from self.core.request("GET", self.path, params=[("path", path)], deadline=Deadline(timeout),
                                             headers={"Accept": "*/*"}, http_timeout=_stream_timeout(timeout),
                                             stream=True)
        if _is_json(reply):
            yield Close(reply)
            raise IsADirectoryError(path)
        return reply

    def write(self, path: str, content: Any, *, rewindable: bool, idempotency_key: str | None = None,
              timeout: float | None = None) -> Op[dict[str, Any]]:
        """PUT content (bytes, or an iterable the runner streams) to path."""
        reply = yield from self.core.request(
            "PUT", self.path, params=[("path", path)], content=content,
            headers={"Content-Type": "application/octet-stream"}, deadline=Deadline(timeout),
            http_timeout=_stream_timeout(timeout),
            idempotency_key=idempotency_key, rewindable=rewindable)
        out = _decode_or_empty(reply)
        return out

    def list(self, path: str, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        reply = yield from self.core.request("GET", self.path, params=[("path", path)], deadline=Deadline(timeout),
                                             stream=True)
        if not _is_json(reply):
            yield Close(reply)
            raise NotADirectoryError(path)
        raw = yield ReadBody(reply, None)
        out = want_dict(json.loads(raw))
        return list(out.get("entries") or [])

    def mkdir(self, path: str, *, timeout: float | None = None) -> Op[bool]:
        """Creates a directory with its parents; True when this call made it."""
        out = want_dict((yield from self.core.call("POST", self.path + "/mkdir", {"path": path},
                                                   deadline=Deadline(timeout))))
        return bool(out.get("created"))

    def remove(self, path: str, *, timeout: float | None = None) -> Op[None]:
        """Removes a file, or a directory recursively."""
        yield from self.core.call("DELETE", self.path, params=[("path", path)], deadline=Deadline(timeout))


def _stream_timeout(timeout: float | None) -> float:
    """A streamed body may be silent for long: no read timeout but the
    call's own."""
    return FOREVER if timeout is None else timeout


def _is_json(reply: Reply) -> bool:
    ct = reply.headers.get("content-type", "")
    return ct.split(";")[0].strip() == "application/json"


def _decode_or_empty(reply: Reply) -> dict[str, Any]:
    if not reply.body:
        return {}
    v = json.loads(reply.body)
    return v if isinstance(v, dict) else {}


class ProcessesOps:
    """Background processes in one sandbox (``sbx.processes``)."""

    def __init__(self, core: Core, id: str) -> None:
        self.core = core
        self.path = sandbox_path(id) + "/processes"

    @staticmethod
    def _body(cmd: str | Sequence[str], env: Mapping[str, str] | None, cwd: str | None, tag: str | None,
              stdin: bool, pty: tuple[int, int] | None, timeout_ms: int | None) -> dict[str, Any]:
        b = exec_body(cmd, env, cwd, timeout_ms, None)
        b.update(_drop_none({"tag": tag, "stdin": stdin or None,
                             "pty": {"cols": pty[0], "rows": pty[1]} if pty else None}))
        return b

    def start(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
              tag: str | None = None, stdin: bool = False, pty: tuple[int, int] | None = None,
              timeout_ms: int | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Starts a process in the background and returns it (``pid``)."""
        body = self._body(cmd, env, cwd, tag, stdin, pty, timeout_ms)
        return want_dict((yield from self.core.call("POST", self.path, body, deadline=Deadline(timeout))))

    def start_stream(self, cmd: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: str | None = None, tag: str | None = None, stdin: bool = False,
                     pty: tuple[int, int] | None = None, timeout_ms: int | None = None,
                     timeout: float | None = None) -> Op[Reply]:
        body = self._body(cmd, env, cwd, tag, stdin, pty, timeout_ms)
        return (yield from self.core.request(
            "POST", self.path, params=[("stream", "true")], json=body, has_json=True,
            headers={"Accept": "application/x-ndjson"}, deadline=Deadline(timeout),
            http_timeout=_stream_timeout(timeout), stream=True))

    def connect(self, pid: int, *, timeout: float | None = None) -> Op[Reply]:
        return (yield from self.core.request(
            "GET", f"{self.path}/{pid}/stream", headers={"Accept": "application/x-ndjson"},
            deadline=Deadline(timeout), http_timeout=_stream_timeout(timeout), stream=True))

    def list(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        out = want_dict((yield from self.core.call("GET", self.path, deadline=Deadline(timeout))))
        return list(out.get("processes") or [])

    def send_input(self, pid: int, data: str | bytes | None = None, *, eof: bool = False,
                   timeout: float | None = None) -> Op[None]:
        """Writes to the process's stdin (or PTY); ``eof`` closes stdin."""
        body: dict[str, Any] = {}
        if isinstance(data, bytes):
            body["data_b64"] = base64.b64encode(data).decode()
        elif data is not None:
            body["data"] = data
        if eof:
            body["eof"] = True
        yield from self.core.call("POST", f"{self.path}/{pid}/input", body, deadline=Deadline(timeout))

    def signal(self, pid: int, signal: str = "SIGTERM", *, timeout: float | None = None) -> Op[None]:
        yield from self.core.call("POST", f"{self.path}/{pid}/signal", {"signal": signal},
                                  deadline=Deadline(timeout))

    def resize(self, pid: int, cols: int, rows: int, *, timeout: float | None = None) -> Op[None]:
        """Resizes the process's PTY."""
        yield from self.core.call("POST", f"{self.path}/{pid}/resize", {"cols": cols, "rows": rows},
                                  deadline=Deadline(timeout))

    def kill(self, pid: int, *, timeout: float | None = None) -> Op[None]:
        """SIGKILLs the process."""
        yield from self.core.call("DELETE", f"{self.path}/{pid}", deadline=Deadline(timeout))


class PreviewOps:
    """Preview URLs of one sandbox's ports (``sbx.preview``)."""

    def __init__(self, core: Core, id: str) -> None:
        self.core = core
        self.path = sandbox_path(id) + "/preview-urls/"

    def url(self, port: int, *, expires_in: int | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """The URL (and token) that reaches ``port`` in the sandbox;
        ``expires_in`` seconds bounds the token."""
        q = [("expires_in_seconds", str(expires_in))] if expires_in else []
        return want_dict((yield from self.core.call("GET", self.path + str(port), params=q,
                                                    deadline=Deadline(timeout))))

    def set_public(self, port: int, public: bool, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Makes the port reachable without a token (or not)."""
        return want_dict((yield from self.core.call("POST", self.path + str(port), {"public": public},
                                                    deadline=Deadline(timeout))))

    def revoke(self, port: int, *, timeout: float | None = None) -> Op[None]:
        """Invalidates the port's tokens."""
        yield from self.core.call("DELETE", self.path + str(port), deadline=Deadline(timeout))


class ArtifactsOps:
    """Files exported out of sandboxes (``client.artifacts``, ``sbx.artifacts``)."""

    def __init__(self, core: Core, sandbox_id: str | None = None) -> None:
        self.core = core
        self.sandbox_id = sandbox_id

    def _sid(self, sandbox_id: str | None) -> str:
        sid = sandbox_id or self.sandbox_id
        if not sid:
            raise PlatinumError("artifacts: pass sandbox_id=")
        return sid

    def create(self, path: str, *, name: str | None = None, sandbox_id: str | None = None,
               timeout: float | None = None) -> Op[dict[str, Any]]:
        """Exports a file or directory of the sandbox as an artifact."""
        return want_dict((yield from self.core.call(
            "POST", sandbox_path(self._sid(sandbox_id)) + "/artifacts", _drop_none({"path": path, "name": name}),
            deadline=Deadline(timeout))))

    def list(self, *, sandbox_id: str | None = None, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        sid = sandbox_id or self.sandbox_id
        q = [("sandbox_id", sid)] if sid else []
        out = want_dict((yield from self.core.call("GET", "/v1/artifacts", params=q, deadline=Deadline(timeout))))
        return list(out.get("rows") or [])

    def get(self, id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        return want_dict((yield from self.core.call("GET", "/v1/artifacts/" + seg(id), deadline=Deadline(timeout))))

    def open(self, id: str, *, timeout: float | None = None) -> Op[Reply]:
        return (yield from self.core.request("GET", "/v1/artifacts/" + seg(id) + "/content",
                                             headers={"Accept": "*/*"}, deadline=Deadline(timeout),
                                             http_timeout=_stream_timeout(timeout), stream=True))

    def delete(self, id: str, *, timeout: float | None = None) -> Op[None]:
        yield from self.core.call("DELETE", "/v1/artifacts/" + seg(id), deadline=Deadline(timeout))


class OrgsOps:
    """Organizations and quotas (platform admin token)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def create(self, name: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Creates an org: ``{"org": {...}, "token": "pt_..."}`` (the token
        is shown only this once)."""
        return want_dict((yield from self.core.call("POST", "/v1/orgs", {"name": name}, deadline=Deadline(timeout))))

    def quotas(self, id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        return want_dict((yield from self.core.call("GET", "/v1/orgs/" + seg(id) + "/quotas",
                                                    deadline=Deadline(timeout))))

    def set_quotas(self, id: str, *, max_sandboxes: int | None = None, max_cpu: float | None = None,
                   max_ram_mb: int | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Replaces the org's quota overrides (None follows the server
        default, 0 means no limit)."""
        body = {"max_sandboxes": max_sandboxes, "max_cpu": max_cpu, "max_ram_mb": max_ram_mb}
        return want_dict((yield from self.core.call("PUT", "/v1/orgs/" + seg(id) + "/quotas", body,
                                                    deadline=Deadline(timeout))))


class ProjectsOps:
    """Projects of the caller's organization (``client.projects``); a
    sandbox is created in one with ``project_id=``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def create(self, name: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Creates a project (``prj_…``) in the token's organization."""
        return want_dict((yield from self.core.call("POST", "/v1/projects", {"name": name},
                                                    deadline=Deadline(timeout))))

    def list(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        out = want_dict((yield from self.core.call("GET", "/v1/projects", deadline=Deadline(timeout))))
        return list(out.get("rows") or [])


class TemplatesOps:
    def __init__(self, core: Core) -> None:
        self.core = core

    def list(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        out = yield from self.core.call("GET", "/v1/templates", deadline=Deadline(timeout))
        if isinstance(out, dict):
            return list(out.get("rows") or out.get("templates") or [])
        return list(out or [])

    def get(self, slug: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        return want_dict((yield from self.core.call("GET", "/v1/templates/" + seg(slug), deadline=Deadline(timeout))))

    def create(self, slug: str, *, from_image: str | None = None, image_upload_id: str | None = None,
               dockerfile: str | None = None, context_upload_id: str | None = None,
               build_args: Mapping[str, str] | None = None, no_cache: bool | None = None,
               snapshot: bool | None = None, network: Mapping[str, Any] | None = None,
               timeout_seconds: int | None = None, settings: Mapping[str, Any] | None = None,
               timeout: float | None = None) -> Op[dict[str, Any]]:
        """Builds a version of the org's own template from an image, an
        uploaded image tarball or a Dockerfile (docs/templates.md). The
        build runs in the background: ``wait_build`` follows it."""
        body = _drop_none({"slug": slug, "from_image": from_image, "image_upload_id": image_upload_id,
                           "dockerfile": dockerfile, "context_upload_id": context_upload_id,
                           "build_args": dict(build_args) if build_args is not None else None,
                           "no_cache": no_cache, "snapshot": snapshot,
                           "network": dict(network) if network is not None else None,
                           "timeout_seconds": timeout_seconds,
                           "settings": dict(settings) if settings is not None else None})
        return want_dict((yield from self.core.call("POST", "/v1/templates", body, deadline=Deadline(timeout))))

    def upload(self, purpose: str, content: bytes, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Uploads a tar: a Dockerfile's build context (``purpose="context"``)
        or an image tarball (``purpose="image"``)."""
        reply = yield from self.core.request(
            "POST", "/v1/templates/uploads", params=[("purpose", purpose)], content=content,
            headers={"Content-Type": "application/x-tar"}, deadline=Deadline(timeout),
            http_timeout=_stream_timeout(timeout))
        return _decode_or_empty(reply)

    def get_build(self, slug: str, build_id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """A build's status (running, ready, failed), the version it made
        and, when it failed, where (``failure``)."""
        return want_dict((yield from self.core.call("GET", _build_path(slug, build_id), deadline=Deadline(timeout))))

    def logs(self, slug: str, build_id: str, *, since: int = 0,
             timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        """The build's log lines so far after line ``since`` (one dict per
        line: ``seq``, ``type``, ...)."""
        reply = yield from self.core.request("GET", _build_path(slug, build_id) + "/logs",
                                             params=[("since", str(since))], headers={"Accept": "application/x-ndjson"},
                                             deadline=Deadline(timeout), stream=True)
        raw = yield ReadBody(reply, None)
        text = raw.decode() if isinstance(raw, (bytes, bytearray)) else str(raw or "")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_build(self, slug: str, build_id: str, *, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Polls a build until it is no longer running and returns it."""
        dl = Deadline(timeout)
        while True:
            b = yield from self.get_build(slug, build_id, timeout=dl.remaining())
            if b.get("status") != "running":
                return b
            if dl.expired():
                raise WaitTimeoutError(f"template build {build_id} is still running after {dl.timeout}s", b)
            yield Sleep(dl.cap(self.core.poll_interval))

    def versions(self, slug: str, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        """Every version of the template, newest first."""
        out = want_dict((yield from self.core.call("GET", "/v1/templates/" + seg(slug) + "/versions",
                                                   deadline=Deadline(timeout))))
        return list(out.get("rows") or [])

    def delete(self, slug: str, *, timeout: float | None = None) -> Op[builtins.list[str]]:
        """Deletes the org's template, every version; returns the deleted
        version IDs. A version a sandbox uses is ``template_in_use`` (409)."""
        out = want_dict((yield from self.core.call("DELETE", "/v1/templates/" + seg(slug), deadline=Deadline(timeout))))
        return list(out.get("deleted") or [])

    def delete_version(self, slug: str, version_id: str, *, timeout: float | None = None) -> Op[None]:
        yield from self.core.call("DELETE", "/v1/templates/" + seg(slug) + "/versions/" + seg(version_id),
                                  deadline=Deadline(timeout))

    def set_registry_credential(self, registry: str, *, username: str | None = None, password: str | None = None,
                                token: str | None = None, timeout: float | None = None) -> Op[dict[str, Any]]:
        """Stores the org's credentials for a registry host: a username and
        password, or a token. The secret is never returned."""
        body = _drop_none({"username": username, "password": password, "token": token})
        return want_dict((yield from self.core.call("PUT", "/v1/registry-credentials/" + seg(registry), body,
                                                    deadline=Deadline(timeout))))

    def registry_credentials(self, *, timeout: float | None = None) -> Op[builtins.list[dict[str, Any]]]:
        out = want_dict((yield from self.core.call("GET", "/v1/registry-credentials", deadline=Deadline(timeout))))
        return list(out.get("rows") or [])

    def delete_registry_credential(self, registry: str, *, timeout: float | None = None) -> Op[None]:
        yield from self.core.call("DELETE", "/v1/registry-credentials/" + seg(registry), deadline=Deadline(timeout))


def _build_path(slug: str, build_id: str) -> str:
    return "/v1/templates/" + seg(slug) + "/builds/" + seg(build_id)


def health(core: Core, *, timeout: float | None = None) -> Op[None]:
    """GET /healthz (no token needed)."""
    yield from core.call("GET", "/healthz", deadline=Deadline(timeout))

