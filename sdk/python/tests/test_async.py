"""The asyncio client against a real ptd."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any, AsyncIterator

import httpx
import pytest

from platinum import AsyncPlatinum, AsyncSandbox, NotFoundError, SandboxNotReadyError

from conftest import tag


@pytest.mark.asyncio
async def test_twenty_concurrent_creates(aclient: AsyncPlatinum) -> None:
    t = tag()
    sent: list[float] = []
    answered: list[float] = []

    async def on_request(r: httpx.Request) -> None:
        if r.method == "POST" and r.url.path == "/v1/sandboxes":
            sent.append(time.monotonic())

    async def on_response(r: httpx.Response) -> None:
        if r.request.method == "POST" and r.request.url.path == "/v1/sandboxes":
            answered.append(time.monotonic())

    http = httpx.AsyncClient(event_hooks={"request": [on_request], "response": [on_response]})
    async with http, AsyncPlatinum(http_client=http) as c:
        made = await asyncio.gather(*(
            c.sandboxes.create(template="busybox", metadata={"suite": t}, wait_for_running=True, timeout=300)
            for _ in range(20)))
        try:
            # Concurrent, not one after another: every create was on the wire
            # before ptd answered any of them (each answers once running).
            assert len(sent) == 20 and len(answered) == 20
            assert max(sent) < min(answered), "the creates did not overlap"
            assert len({s.id for s in made}) == 20
            assert all(s.state == "running" for s in made)
            outs = await asyncio.gather(*(s.exec(["echo", s.id]) for s in made))
            assert [o.stdout for o in outs] == [s.id + "\n" for s in made]
            listed = [s.id async for s in aclient.sandboxes.iter(metadata={"suite": t}, limit=7)]
            assert sorted(listed) == sorted(s.id for s in made)
        finally:
            await asyncio.gather(*(s.delete() for s in made), return_exceptions=True)


@pytest.mark.asyncio
async def test_async_handle_streams_and_errors(aclient: AsyncPlatinum) -> None:
    sbx = await aclient.sandboxes.create(template="busybox", wait_for_running=True)
    try:
        assert isinstance(sbx, AsyncSandbox) and sbx["state"] == "running"

        # Streamed exec: "first" is read before the command can finish.
        script = "echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second"
        seen: list[str] = []
        stream = await sbx.exec_stream(["sh", "-c", script], timeout=60)
        async with stream:
            async for ev in stream:
                if ev.type == "stdout":
                    seen.append(ev.data)
                    if "".join(seen) == "first\n":
                        await sbx.files.write("/tmp/go", b"")
        assert "".join(seen) == "first\nsecond\n" and stream.result is not None
        assert stream.result.exit_code == 0

        # A streamed upload from an async iterator and a streamed download.
        want = hashlib.sha256()

        async def chunks() -> AsyncIterator[bytes]:
            for i in range(32):
                b = bytes([i]) * (64 << 10)
                want.update(b)
                yield b

        await sbx.files.write("/root/a.bin", chunks())
        got = hashlib.sha256()
        async with await sbx.files.read_stream("/root/a.bin") as s:
            async for part in s:
                got.update(part)
        assert got.hexdigest() == want.hexdigest()
        assert await sbx.files.read("/etc/hostname")

        res = await sbx.commands.run("echo $((1 + 2))")
        assert res.stdout == "3\n"
        await sbx.stop(wait_for_stopped=True)
        assert sbx.state == "stopped"
        with pytest.raises(SandboxNotReadyError):
            await sbx.exec(["true"])
        await sbx.start(wait_for_running=True)
        assert sbx.state == "running"
    finally:
        await sbx.delete()
    with pytest.raises(NotFoundError):
        await aclient.sandboxes.get("sbx_01KA0000000000000000000000")


@pytest.mark.asyncio
async def test_calls_do_not_block_the_event_loop(aclient: AsyncPlatinum, tmp_path: Any) -> None:
    sbx = await aclient.sandboxes.create(template="busybox", wait_for_running=True)
    try:
        order: list[str] = []

        async def ticker() -> None:
            for _ in range(5):
                await asyncio.sleep(0.01)
            order.append("ticked")

        async def slow() -> None:
            await sbx.exec(["sleep", "2"])
            order.append("exec done")

        await asyncio.gather(slow(), ticker())
        assert order == ["ticked", "exec done"], "the loop was blocked while a command ran"

        # A file object is read in a worker thread, not on the loop.
        src = tmp_path / "f.bin"
        src.write_bytes(b"z" * (300 << 10))
        with open(src, "rb") as f:
            await sbx.files.write("/root/f.bin", f)
        assert await sbx.files.read_bytes("/root/f.bin") == src.read_bytes()
    finally:
        await sbx.delete()
