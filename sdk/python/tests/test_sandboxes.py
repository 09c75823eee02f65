"""The SDK against a real ptd, beyond the guide's examples: pages, typed
errors, waits, idempotency, streamed files and commands, and the rest of a
handle's calls."""

from __future__ import annotations

import hashlib
import os
import threading
import tracemalloc
from typing import Callable, Iterator

import httpx
import pytest

from platinum import (
    ConflictError,
    ForbiddenError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    Platinum,
    QuotaExceededError,
    Sandbox,
    SandboxDestroyedError,
    SandboxNotReadyError,
    SandboxNotResizableError,
    SandboxTTLExceededError,
    UnauthorizedError,
    new_idempotency_key,
)

from conftest import tag

Track = Callable[[str], None]


def test_pages_and_iter_over_more_than_one_page(client: Platinum, track: Track) -> None:
    t = tag()
    made = []
    for _ in range(5):
        s = client.sandboxes.create(template="busybox", metadata={"suite": t})
        track(s.id)
        made.append(s.id)
    newest_first = list(reversed(made))
    page = client.sandboxes.list(metadata={"suite": t}, limit=2, paginated=True)
    assert page["total"] == 5 and page.total == 5
    assert [r.id for r in page["rows"]] == newest_first[:2]
    page3 = client.sandboxes.list(metadata={"suite": t}, limit=2, offset=4)
    assert [r.id for r in page3.rows] == newest_first[4:]
    assert [s.id for s in client.sandboxes.iter(metadata={"suite": t}, limit=2)] == newest_first


def test_typed_errors(client: Platinum, busybox: Sandbox, track: Track) -> None:
    with pytest.raises(InvalidRequestError) as bad:
        client.sandboxes.list(limit=1000)
    assert (bad.value.code, bad.value.status, bad.value.field) == ("invalid_request", 400, "limit")
    assert bad.value.message

    with pytest.raises(NotFoundError) as nf:
        client.sandboxes.get("sbx_01KA0000000000000000000000")
    assert nf.value.code == "not_found"
    with pytest.raises(NotFoundError) as nft:
        client.sandboxes.create(template="no-such-template")
    assert nft.value.field == "template"

    with pytest.raises(UnauthorizedError) as un:
        Platinum(token="pt_wrong", api_url=client.api_url).sandboxes.list()
    assert un.value.status == 401

    with pytest.raises(SandboxTTLExceededError) as ttl:
        client.sandboxes.create(template="busybox", ttl_ms=3_600_001)
    assert ttl.value.code == "sandbox_ttl_exceeded" and ttl.value.max_ttl_ms == 3_600_000
    assert isinstance(ttl.value, InvalidRequestError)

    # conflict: a parent with a live child cannot be deleted.
    child = client.sandboxes.create(template="busybox", parent_id=busybox.id, wait_for_running=True)
    track(child.id)
    with pytest.raises(ConflictError) as cf:
        busybox.delete()
    assert cf.value.code == "conflict" and cf.value.children == [child.id]

    # idempotency_key_reused: one key, two different requests.
    k = new_idempotency_key()
    first = client.sandboxes.create(template="busybox", idempotency_key=k)
    track(first.id)
    with pytest.raises(IdempotencyKeyReusedError):
        client.sandboxes.create(template="busybox", name="other", idempotency_key=k)

    # sandbox_not_ready: exec in a stopped sandbox.
    child.stop(wait_for_stopped=True)
    with pytest.raises(SandboxNotReadyError) as nr:
        child.exec(["true"])
    assert nr.value.state == "stopped" and isinstance(nr.value, ConflictError)

    # sandbox_destroyed: a TTL for a killed sandbox.
    first.kill()
    assert (first.status, first.destroyed_reason) == ("destroyed", "user_killed")
    with pytest.raises(SandboxDestroyedError) as de:
        first.set_ttl(60_000)
    assert de.value.status == 409


def test_resize_and_environment_limits(busybox: Sandbox) -> None:
    live = busybox.resize(cpu=2)
    assert (live.applies_at, live.cpu) == ("now", 2) and live.live is not None
    with pytest.raises(SandboxNotResizableError) as nr:
        busybox.resize(cpu=64)
    e = nr.value
    assert (e.code, e.status) == ("sandbox_not_resizable", 409) and isinstance(e, ConflictError)
    assert e.hint["action"] == "stop_then_resize"
    assert e.hint["steps"] == [f"POST /v1/sandboxes/{busybox.id}/stop", f"POST /v1/sandboxes/{busybox.id}/resize"]
    assert e.live_resize["supported"] is False

    with pytest.raises(InvalidRequestError) as one:
        busybox.set_env({"BIG": "x" * (129 << 10)})
    assert (one.value.code, one.value.field) == ("env_var_too_large", "env")
    with pytest.raises(PayloadTooLargeError) as total:
        busybox.set_env({k: "x" * (100 << 10) for k in ("A", "B", "C")})
    assert (total.value.code, total.value.status) == ("env_too_large", 413)
    assert "A" not in busybox.refresh().env_keys, "a refused patch changes nothing"


def test_quota_and_forbidden(client: Platinum, track: Track) -> None:
    created = client.orgs.create("pysdk-" + tag())
    org_id, org_token = created["org"]["id"], created["token"]
    client.orgs.set_quotas(org_id, max_sandboxes=1)
    with Platinum(token=org_token, api_url=client.api_url) as oc:
        first = oc.sandboxes.create(template="busybox")
        try:
            with pytest.raises(QuotaExceededError) as q:
                oc.sandboxes.create(template="busybox")
            assert (q.value.status, q.value.limit, q.value.max) == (429, "sandboxes", 1)
            with pytest.raises(ForbiddenError) as fb:
                oc.orgs.create("not-allowed-" + tag())
            assert fb.value.code == "forbidden" and fb.value.status == 403
        finally:
            first.delete()


def _statuses(seen: list[tuple[str, str, int]]) -> Callable[[httpx.Response], None]:
    def hook(resp: httpx.Response) -> None:
        seen.append((resp.request.method, resp.request.url.path, resp.status_code))

    return hook


def test_wait_that_runs_out_keeps_polling_the_same_sandbox(track: Track) -> None:
    seen: list[tuple[str, str, int]] = []
    t = tag()
    http = httpx.Client(event_hooks={"response": [_statuses(seen)]})
    with Platinum(http_client=http, poll_interval=0.1) as c:
        sbx = c.sandboxes.create(template="pt-base", metadata={"suite": t}, wait_for_running=True,
                                 wait_timeout_ms=1, timeout=120)
        track(sbx.id)
        assert sbx.state == "running"
        assert c.sandboxes.list(metadata={"suite": t})["rows"][0].id == sbx.id
        assert len(c.sandboxes.list(metadata={"suite": t})["rows"]) == 1
    http.close()
    posts = [s for s in seen if s[0] == "POST"]
    assert posts == [("POST", "/v1/sandboxes", 202)], "one create, answered 202 wait_timed_out"
    polls = [s for s in seen if s[0] == "GET" and s[1] == f"/v1/sandboxes/{sbx.id}"]
    assert polls and all(p[2] == 200 for p in polls)


def test_idempotent_create_returns_the_same_sandbox(client: Platinum, track: Track) -> None:
    t = tag()
    k = new_idempotency_key()
    a = client.sandboxes.create(template="busybox", metadata={"suite": t}, idempotency_key=k)
    track(a.id)
    b = client.sandboxes.create(template="busybox", metadata={"suite": t}, idempotency_key=k)
    assert a.id == b.id
    assert [r.id for r in client.sandboxes.list(metadata={"suite": t})["rows"]] == [a.id]


def test_ten_megabyte_file_round_trip_streams(busybox: Sandbox) -> None:
    size, chunk = 10 << 20, 64 << 10
    block = hashlib.sha256(b"seed").digest() * (chunk // 32)
    want = hashlib.sha256()

    def chunks() -> Iterator[bytes]:
        for i in range(size // chunk):
            b = bytes([i % 251]) + block[1:]
            want.update(b)
            yield b

    tracemalloc.start()
    busybox.files.write("/root/big.bin", chunks())
    got = hashlib.sha256()
    n = 0
    with busybox.files.read_stream("/root/big.bin") as s:
        assert s.size in (None, size)  # large files come chunked
        for part in s:
            got.update(part)
            n += len(part)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == size and got.hexdigest() == want.hexdigest()
    assert peak < 4 << 20, f"the transfer held {peak} bytes at once: it buffered the body"
    out = busybox.exec(["sha256sum", "/root/big.bin"]).stdout
    assert out.split()[0] == want.hexdigest()


def test_streamed_exec_output_arrives_before_the_command_ends(busybox: Sandbox) -> None:
    # The command prints, then waits for a file only this test creates after
    # reading that output: buffered output would deadlock (the timeout
    # turns that into a failure).
    script = "echo first; echo oops >&2; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second; exit 3"
    out: list[str] = []
    with busybox.exec_stream(["sh", "-c", script], timeout=60) as stream:
        for ev in stream:
            if ev.type == "stdout":
                out.append(ev.data)
                if "".join(out) == "first\n":
                    busybox.files.write("/tmp/go", "")
        assert stream.pid is not None and stream.pid > 0
    assert "".join(out) == "first\nsecond\n"
    assert stream.result is not None and stream.result.exit_code == 3

    # exec with callbacks: streamed to them as it comes, not collected.
    outs: list[str] = []
    errs: list[str] = []
    res = busybox.exec("echo a; echo b >&2; exit 4", on_stdout=outs.append, on_stderr=errs.append)
    assert (res.exit_code, "".join(outs), "".join(errs)) == (4, "a\n", "b\n")
    assert (res.stdout, res.stderr) == ("", "")


def test_exec_env_files_and_handle_calls(client: Platinum, busybox: Sandbox) -> None:
    sbx = busybox
    r = sbx.exec(["sh", "-c", "echo out; echo err >&2; exit 7"], env={"X": "1"})
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert sbx.exec("echo $X", env={"X": "shell"}).stdout == "shell\n"
    assert sbx.exec(["sleep", "5"], timeout_ms=200).timed_out

    # set_env: a None value removes the key.
    sbx.set_env({"OLD_UNUSED": "x"})
    res = sbx.set_env({"API_TOKEN": "new-value", "OLD_UNUSED": None})
    assert res.applies == "next_exec" and "API_TOKEN" in res.env_keys and "OLD_UNUSED" not in res.env_keys
    assert sbx.exec(["sh", "-c", "echo $API_TOKEN"]).stdout == "new-value\n"
    assert sbx.exec(["sh", "-c", 'test -z "${OLD_UNUSED+set}"']).exit_code == 0

    # Files: text, bytes, a file object, list, mkdir, remove.
    assert sbx.files.mkdir("/root/d/e") is True
    sbx.files.write("/root/d/e/t.txt", "héllo")
    sbx.files.write("/root/d/b.bin", b"\x00\x01\x02")
    with open(__file__, "rb") as f:
        sbx.files.write("/root/d/src.py", f)
    assert sbx.files.read("/root/d/e/t.txt") == "héllo"
    assert sbx.files.read_bytes("/root/d/b.bin") == b"\x00\x01\x02"
    with open(__file__, "rb") as f:
        assert sbx.files.read_bytes("/root/d/src.py") == f.read()
    names = sorted((e.name, e.type) for e in sbx.files.list("/root/d"))
    assert names == [("b.bin", "file"), ("e", "dir"), ("src.py", "file")]
    sbx.files.remove("/root/d/e")
    assert "e" not in [e.name for e in sbx.files.list("/root/d")]
    with pytest.raises(NotFoundError):
        sbx.files.read("/root/d/e/t.txt")
    with pytest.raises(IsADirectoryError):
        sbx.files.read("/root/d")

    # Auto-resume, by handle and by id.
    assert sbx.set_auto_resume(False).auto_resume is False
    assert client.sandboxes.update(sbx.id, auto_resume=True).auto_resume is True

    m = sbx.metrics()
    assert m.memory_limit_bytes > 0 and m.pids >= 1
    u = sbx.usage()
    assert u.id == sbx.id

    p = sbx.preview.url(8080)
    assert p.port == 8080 and p.url and p.token
    assert sbx.preview_url(8080).url == p.url

    n = sbx.set_network(egress="deny")
    assert n.network["egress"] == "deny" and n.applies == "now"

    assert sbx.refresh().state == "running"


def test_snapshot_restore_and_fork(client: Platinum, busybox: Sandbox, track: Track) -> None:
    sbx = busybox
    sbx.files.write("/root/v.txt", "one")
    snap = sbx.snapshot(name="v1")
    assert snap.id.startswith("snap_")
    client.snapshots.wait(snap.id, timeout=120)
    assert snap.id in [s.id for s in sbx.snapshots()]
    sbx.files.write("/root/v.txt", "two")
    sbx.restore(snap.id, wait_for_running=True, timeout=120)
    assert sbx.state == "running" and sbx.files.read("/root/v.txt") == "one"

    forked = sbx.fork(count=1, wait=True, metadata={"copy": "yes"}, timeout=120)
    kids = forked["sandboxes"]
    for k in kids:
        track(k.id)
    assert len(kids) == 1 and kids[0].id != sbx.id and kids[0].metadata["copy"] == "yes"
    kid = client.sandboxes.wait_for_state(kids[0].id, "running", timeout=120)
    assert kid.files.read("/root/v.txt") == "one"

    bkp = sbx.backup(name="b1", wait=True, timeout=120)
    assert bkp.id.startswith("bkp_") and bkp.state == "ready" and bkp.kind == "backup"
    assert bkp.id in [b.id for b in sbx.backups()]
    copy = client.sandboxes.create(from_backup=bkp.id, wait_for_running=True, timeout=120)
    track(copy.id)
    assert copy.id != sbx.id and copy.files.read("/root/v.txt") == "one"


def test_ttl_fields_set_ttl_kill_and_commands(client: Platinum, track: Track) -> None:
    sbx = client.sandboxes.create(template="busybox", ttl_ms=10 * 60 * 1000, metadata={"run": "nightly-eval"},
                                  wait_for_running=True)
    track(sbx.id)
    assert sbx.id.startswith("sbx_") and sbx.status in ("ready", "running", "idle")
    assert sbx.org_id and sbx.project_id.startswith("prj_")
    assert sbx.template_id == sbx.template_slug == "busybox"
    assert sbx.template_version >= 1 and sbx.template_version_id.startswith("tplv_")
    assert sbx.ttl_ms == 600_000 and sbx.expires_at and sbx.metadata == {"run": "nightly-eval"}
    assert sbx.destroyed_at is None and sbx.destroyed_reason is None

    before = sbx.expires_at
    updated = client.sandboxes.set_ttl(sbx.id, 60 * 60 * 1000)
    assert updated.ttl_ms == 3_600_000 and (updated.expires_at or "") > (before or "")

    assert sbx.commands.run("echo $((6 * 7))").stdout == "42\n"
    art = sbx.artifacts.create("/etc/hostname")
    assert art.id and art.sandbox_id == sbx.id
    assert client.artifacts.read_bytes(art.id) == sbx.files.read_bytes("/etc/hostname")

    destroyed = client.sandboxes.kill(sbx.id)
    assert (destroyed.status, destroyed.destroyed_reason) == ("destroyed", "user_killed")
    assert destroyed.destroyed_at
    again = client.sandboxes.kill(sbx.id)
    assert again.destroyed_at == destroyed.destroyed_at


def test_create_pins_a_template_version_in_another_project(client: Platinum, busybox: Sandbox,
                                                          track: Track) -> None:
    # template_version_id alone (no slug) pins the version another sandbox
    # booted; project_id puts the sandbox in another project of the org.
    prj = client.projects.create("py-" + tag())
    assert prj.id.startswith("prj_") and prj.id != busybox.project_id
    assert prj.id in [p.id for p in client.projects.list()]
    sbx = client.sandboxes.create(template_version_id=busybox.template_version_id, project_id=prj.id,
                                  wait_for_running=True, timeout=120)
    track(sbx.id)
    assert (sbx.template_version_id, sbx.template, sbx.project_id) == (busybox.template_version_id, "busybox", prj.id)
    assert client.sandboxes.get(sbx.id).project_id == prj.id, "the server recorded the project"
    assert [r.id for r in client.sandboxes.list(project_id=prj.id)["rows"]] == [sbx.id]
    assert sbx.exec(["true"]).exit_code == 0


def test_streamed_upload_is_keyed(client: Platinum, busybox: Sandbox) -> None:
    keys: list[str | None] = []

    def hook(r: httpx.Request) -> None:
        if r.method == "PUT":
            keys.append(r.headers.get("Idempotency-Key"))

    http = httpx.Client(event_hooks={"request": [hook]})
    with Platinum(http_client=http) as c:
        c.sandboxes.connect(busybox.id).files.write("/root/s.txt", iter([b"one ", b"two"]))
    http.close()
    assert len(keys) == 1 and (keys[0] or "").startswith("ptk_"), "a streamed upload carries a generated key"
    assert busybox.files.read("/root/s.txt") == "one two"

    # ptd hashed the streamed body under its key: the same upload again gets
    # the first answer without writing, another body under it is refused.
    k = new_idempotency_key()
    first = busybox.files.write("/root/k.txt", iter([b"fir", b"st"]), idempotency_key=k)
    busybox.exec(["sh", "-c", "echo changed > /root/k.txt"])
    again = busybox.files.write("/root/k.txt", iter([b"fir", b"st"]), idempotency_key=k)
    assert dict(again) == dict(first)
    assert busybox.files.read("/root/k.txt") == "changed\n", "the replay wrote nothing"
    with pytest.raises(IdempotencyKeyReusedError):
        busybox.files.write("/root/k.txt", iter([b"other"]), idempotency_key=k)


def test_the_client_is_safe_across_threads(client: Platinum, busybox: Sandbox) -> None:
    errs: list[BaseException] = []

    def work(i: int) -> None:
        try:
            assert busybox.exec(["echo", str(i)]).stdout == f"{i}\n"
        except BaseException as e:  # noqa: BLE001 - reported below
            errs.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs
