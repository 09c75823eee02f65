"""Background processes (the /processes API) against a real ptd: streamed
output, stdin, connect, signals and a PTY."""

from __future__ import annotations

import time
from typing import Callable, Iterator

import pytest

from platinum import (
    AsyncPlatinum,
    ConflictError,
    ExecEvent,
    InvalidRequestError,
    NotFoundError,
    Platinum,
    ProcessStream,
    Sandbox,
)

Track = Callable[[str], None]


@pytest.fixture
def base(client: Platinum, track: Track) -> Sandbox:
    sbx = client.sandboxes.create(template="pt-base", wait_for_running=True, timeout=180)
    track(sbx.id)
    return sbx


def read_until(events: Iterator[ExecEvent], want: bytes) -> bytes:
    """Output (stdout or PTY) read until it contains want."""
    got = b""
    for ev in events:
        if ev.type in ("stdout", "pty"):
            got += ev.bytes
            if want in got:
                return got
        if ev.type == "exit":
            break
    raise AssertionError(f"{want!r} never came; got {got!r}")


def test_stdin_streamed_output_and_eof(base: Sandbox) -> None:
    with base.processes.start_stream(["cat"], stdin=True, timeout=60) as p:
        assert isinstance(p, ProcessStream) and p.pid and p.pid > 0
        events = iter(p)
        p.send_input("hello\n")
        assert read_until(events, b"hello\n") == b"hello\n"
        p.send_input(b"\x00bytes\n")
        assert read_until(events, b"bytes\n") == b"\x00bytes\n"
        p.close_stdin()
        res = p.wait()
    assert res.exit_code == 0


def test_background_connect_list_and_kill(base: Sandbox) -> None:
    proc = base.processes.start(["sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.05; done; echo later"], tag="waiter")
    assert proc.pid > 0 and proc.tag == "waiter" and proc.pty is False
    assert proc.pid in [p.pid for p in base.processes.list()]
    with base.processes.connect(proc.pid, timeout=60) as s:
        base.files.write("/tmp/go", "")
        res = s.wait()
    assert "later\n" in res.stdout and res.exit_code == 0

    sleeper = base.processes.start(["sleep", "300"])
    assert sleeper.pid in [p.pid for p in base.processes.list()]
    base.processes.kill(sleeper.pid)
    deadline = time.monotonic() + 10
    while sleeper.pid in [p.pid for p in base.processes.list()]:
        assert time.monotonic() < deadline, "a killed process is still listed"
        time.sleep(0.05)


def test_signal(base: Sandbox) -> None:
    with base.processes.start_stream(["sleep", "300"], timeout=60) as p:
        p.signal("SIGTERM")
        res = p.wait()
    assert res.exit_code != 0
    with pytest.raises(InvalidRequestError) as e:
        base.processes.signal(p.pid or 0, "SIGNOPE")
    assert e.value.field == "signal"


def test_pty_and_resize(base: Sandbox) -> None:
    with base.processes.start_stream(["sh"], pty=(80, 24), stdin=True, timeout=60) as p:
        events = iter(p)
        p.send_input("stty size\n")
        assert b"24 80" in read_until(events, b"24 80")
        p.resize(100, 30)
        p.send_input("stty size\n")
        assert b"30 100" in read_until(events, b"30 100")
        p.send_input("exit 5\n")
        res = p.wait()
    assert res.exit_code == 5


def test_conflicts_and_unknown_pids(base: Sandbox) -> None:
    proc = base.processes.start(["sleep", "300"])
    try:
        with pytest.raises(ConflictError):
            base.processes.send_input(proc.pid, "x")  # started without stdin
        with pytest.raises(ConflictError):
            base.processes.resize(proc.pid, 80, 24)  # not a PTY
    finally:
        base.processes.kill(proc.pid)
    with pytest.raises(NotFoundError):
        base.processes.connect(999999)


@pytest.mark.asyncio
async def test_async_processes(aclient: AsyncPlatinum) -> None:
    sbx = await aclient.sandboxes.create(template="pt-base", wait_for_running=True, timeout=180)
    try:
        p = await sbx.processes.start_stream(["cat"], stdin=True, timeout=60)
        async with p:
            assert p.pid and p.pid in [x.pid for x in await sbx.processes.list()]
            await p.send_input("ping\n")
            got = b""
            async for ev in p:
                if ev.type == "stdout":
                    got += ev.bytes
                    if got == b"ping\n":
                        await p.send_input(eof=True)
            assert got == b"ping\n"
        assert p.result is not None and p.result.exit_code == 0

        bg = await sbx.processes.start("echo started; sleep 300", tag="bg")
        assert bg.cmd == ["/bin/sh", "-c", "echo started; sleep 300"] and bg.stdin is False
        attached = await sbx.processes.connect(bg.pid)
        await sbx.processes.signal(bg.pid, "SIGKILL")
        res = await attached.wait()
        assert res.exit_code != 0
    finally:
        await sbx.delete()
