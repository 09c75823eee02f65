"""The org's own templates through the SDK (docs/templates.md): a build
context uploaded as a tar, a Dockerfile build waited on, its log and
version, a sandbox from it, deletes refused in use, a failing RUN, and
registry credentials that never come back."""

from __future__ import annotations

import io
import secrets
import tarfile
from typing import Callable

import pytest

from platinum import APIError, AsyncPlatinum, Platinum


def context_tar(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_dockerfile_build(client: Platinum, track: Callable[[str], None]) -> None:
    slug = "py-tpl-" + secrets.token_hex(3)
    up = client.templates.upload("context", context_tar({"hello.txt": "hello from the context\n"}))
    assert up["id"].startswith("tupl_")
    b = client.templates.create(slug, dockerfile="FROM busybox\nCOPY hello.txt /srv/\nRUN echo built >> /srv/hello.txt\n"
                                "ENV WHO=py\nWORKDIR /srv\n", context_upload_id=up["id"],
                                settings={"env": {"FROM_SETTINGS": "yes"}})
    assert b["status"] == "running"
    done = client.templates.wait_build(slug, b["id"], timeout=300)
    assert done["status"] == "ready", done
    assert done["version_id"].startswith("tplv_")

    lines = client.templates.logs(slug, b["id"])
    assert lines[-1]["type"] == "done"
    assert [ln["line"] for ln in lines if ln["type"] == "step"] == [2, 3, 4, 5]
    assert [ln["seq"] for ln in client.templates.logs(slug, b["id"], since=2)][:1] == [3]

    vs = client.templates.versions(slug)
    assert [v["id"] for v in vs] == [done["version_id"]]

    sbx = client.sandboxes.create(template=slug, wait_for_running=True, timeout=300)
    track(sbx.id)
    r = sbx.exec(["sh", "-c", 'pwd; cat hello.txt; echo "$WHO $FROM_SETTINGS"'])
    assert r.stdout == "/srv\nhello from the context\nbuilt\npy yes\n"

    with pytest.raises(APIError) as e:
        client.templates.delete(slug)
    assert e.value.status == 409 and e.value.code == "template_in_use"
    client.sandboxes.delete(sbx.id)


def test_failing_run(client: Platinum) -> None:
    slug = "py-tpl-fail-" + secrets.token_hex(3)
    b = client.templates.create(slug, dockerfile="FROM busybox\nENV A=1\nRUN exit 5\n")
    done = client.templates.wait_build(slug, b["id"], timeout=300)
    assert done["status"] == "failed"
    f = done["failure"]
    assert (f["step"], f["line"], f["exit_code"]) == (2, 3, 5)
    assert done["version_id"] is None


@pytest.mark.asyncio
async def test_registry_credentials_async(aclient: AsyncPlatinum) -> None:
    host = f"registry-{secrets.token_hex(3)}.example.com"
    c = await aclient.templates.set_registry_credential(host, username="bot", password="py-secret-pass")
    assert (c["registry"], c["username"], c["kind"]) == (host, "bot", "basic")
    rows = await aclient.templates.registry_credentials()
    assert any(r["registry"] == host for r in rows)
    assert "py-secret-pass" not in repr([dict(r) for r in rows])
    await aclient.templates.delete_registry_credential(host)
    assert not any(r["registry"] == host for r in await aclient.templates.registry_credentials())
