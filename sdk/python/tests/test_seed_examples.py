"""Every Python example of the Sandboxes guide (docs/ and the product
guide's Sandboxes page), copied verbatim, each under a comment naming its
section. Around each copy the test sets up what the example assumes (a
``parent``, a running ``sbx``) and checks what the guide says happens."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import pytest

from platinum import NotFoundError, Platinum, Sandbox


def test_create(track: Callable[[str], None]) -> None:
    # Sandboxes guide, "Create" (Python):
    import os
    from platinum import Platinum

    client = Platinum(token=os.environ["PT_TOKEN"], api_url=os.environ["PT_API_URL"])
    sbx = client.sandboxes.create(template="pt-base", cpu=2, ram_mb=1024,
                                  wait_for_running=True)
    # (end of example)
    track(sbx.id)
    assert sbx.id.startswith("sbx_")
    assert (sbx.state, sbx["state"], sbx.template, sbx.cpu, sbx.ram_mb) == ("running", "running", "pt-base", 2, 1024)
    client.close()


def test_list_and_iter(client: Platinum, busybox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Sandbox] = []
    real_iter = client.sandboxes.iter

    def recording_iter(**kw: Any) -> Iterator[Sandbox]:
        for s in real_iter(**kw):
            seen.append(s)
            yield s

    monkeypatch.setattr(client.sandboxes, "iter", recording_iter)
    # Sandboxes guide, "List" (Python):
    rows = client.sandboxes.list(state="running", limit=100)["rows"]
    for s in client.sandboxes.iter(state="running"):
        ...
    # (end of example)
    assert busybox.id in [r.id for r in rows]
    assert all(r["state"] == "running" for r in rows)
    assert [x.id for x in seen] == [r.id for r in client.sandboxes.list(state="running", limit=200)["rows"]]
    assert s.id == seen[-1].id


def test_parent_and_children(client: Platinum, track: Callable[[str], None]) -> None:
    parent = client.sandboxes.create(template="pt-base", wait_for_running=True)
    track(parent.id)
    # Sandboxes guide, "Parent and child sandboxes" (Python):
    child = client.sandboxes.create(template="pt-base", parent_id=parent["id"])
    kids = client.sandboxes.children(parent["id"])
    # (end of example)
    track(child.id)
    assert child.parent_id == parent.id
    assert [k.id for k in kids] == [child.id]

    # Sandboxes guide, "Parent and child sandboxes", listing by position (Python):
    children = client.sandboxes.list(parent_id=parent["id"])["rows"]
    roots = client.sandboxes.list(roots_only=True)["rows"]
    # (end of example)
    assert [c.id for c in children] == [child.id]
    root_ids = [r.id for r in roots]
    assert parent.id in root_ids and child.id not in root_ids
    assert all(r.parent_id is None for r in roots)


def test_get_and_connect(client: Platinum, busybox: Sandbox) -> None:
    # The guide's placeholder id names no sandbox: a typed not_found.
    # Each line runs in a wrapper of its own, so the second runs too.
    with pytest.raises(NotFoundError) as e:
        # Sandboxes guide, "Get" (Python), line 1:
        s = client.sandboxes.get("sbx_01K…")
        # (end of example)
    assert e.value.code == "not_found" and e.value.status == 404
    with pytest.raises(NotFoundError) as e:
        # Sandboxes guide, "Get" (Python), line 2:
        sbx = client.sandboxes.connect("sbx_01K…")
        # (end of example)
    assert e.value.code == "not_found" and e.value.status == 404

    # The same two lines with a real sandbox's id in the placeholder's place.
    s = client.sandboxes.get(busybox.id)
    sbx = client.sandboxes.connect(busybox.id)
    assert s.id == sbx.id == busybox.id and s.state == "running"
    assert sbx.exec(["echo", "connected"]).stdout == "connected\n"


def test_rename(client: Platinum, busybox: Sandbox) -> None:
    sbx = busybox
    # Sandboxes guide, "Rename" (Python):
    sbx.rename("ci-runner-2")
    # (end of example)
    assert sbx.name == "ci-runner-2"
    assert client.sandboxes.get(sbx.id)["name"] == "ci-runner-2"
    # "Pass null (Python: None) to clear the name."
    sbx.rename(None)
    assert sbx.name is None and client.sandboxes.get(sbx.id).name is None


def test_stop_start_resize_archive_delete(client: Platinum, track: Callable[[str], None]) -> None:
    sbx = client.sandboxes.create(template="busybox", wait_for_running=True)
    track(sbx.id)
    sbx.files.write("/root/kept.txt", "kept across stop")

    # Sandboxes guide, "Stop and start" (Python):
    sbx.stop(wait_for_stopped=True)
    sbx.start(wait_for_running=True)
    # (end of example)
    assert sbx.state == "running"
    assert sbx.files.read("/root/kept.txt") == "kept across stop"

    sbx.stop(wait_for_stopped=True)
    assert sbx.state == "stopped"
    # On the stopped sandbox: a cold resize, the next start boots at the new size.
    # Sandboxes guide, "Resize" (Python):
    sbx.resize(cpu=4, ram_mb=8192, disk_gb=8)
    # (end of example)
    got = client.sandboxes.get(sbx.id)
    assert (got.cpu, got.ram_mb, got.disk_gb) == (4, 8192, 8)

    # Sandboxes guide, "Archive" (Python):
    sbx.archive()
    # (end of example)
    assert sbx.state in ("archiving", "archived")
    sbx.wait_for_state("archived", timeout=120)

    # Sandboxes guide, "Delete" (Python):
    sbx.delete()
    # (end of example)
    assert sbx.state in ("deleting", "deleted")
    client.sandboxes.wait_for_state(sbx.id, "deleted", timeout=60)
    with pytest.raises(NotFoundError):
        client.sandboxes.get(sbx.id)
