"""The real `e2b` Python SDK (pinned in requirements.txt) against a real
ptd (see e2b_test.go, TestPythonSDK), told only E2B_API_URL,
E2B_SANDBOX_URL and E2B_API_KEY: create, commands, files, pause and
connect, kill, and the errors of a missing sandbox."""

from __future__ import annotations

import secrets
from typing import Iterator

import pytest
from e2b import CommandExitException, NotFoundException, Sandbox, SandboxQuery

TAG = "py-" + secrets.token_hex(4)


@pytest.fixture(scope="module")
def sbx() -> Iterator[Sandbox]:
    s = Sandbox.create("base", timeout=300, metadata={"suite": TAG}, envs={"SBX_LEVEL": "from-create"})
    try:
        yield s
    finally:
        s.kill()


def test_create_answers_a_ready_sandbox(sbx: Sandbox) -> None:
    assert sbx.sandbox_id.startswith("sbx_")
    assert sbx.is_running()
    info = sbx.get_info()
    assert info.metadata["suite"] == TAG


def test_commands_output_exit_code_envs_cwd(sbx: Sandbox) -> None:
    r = sbx.commands.run("echo hello; echo oops >&2")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "hello\n", "oops\n")
    with pytest.raises(CommandExitException) as err:
        sbx.commands.run("exit 3")
    assert err.value.exit_code == 3
    r = sbx.commands.run("echo $SBX_LEVEL $PER_CALL; pwd", envs={"PER_CALL": "from-call"}, cwd="/tmp")
    assert r.stdout == "from-create from-call\n/tmp\n"
    seen: list[str] = []
    sbx.commands.run("echo one; echo two", on_stdout=seen.append)
    assert "".join(seen) == "one\ntwo\n"


def test_background_command_list_and_kill(sbx: Sandbox) -> None:
    h = sbx.commands.run("sleep 600", background=True)
    assert h.pid in [p.pid for p in sbx.commands.list()]
    assert sbx.commands.kill(h.pid)
    with pytest.raises(CommandExitException):
        h.wait()


def test_files(sbx: Sandbox) -> None:
    sbx.files.write("/root/py/a.txt", "from python\n")
    assert sbx.files.read("/root/py/a.txt") == "from python\n"
    assert [e.name for e in sbx.files.list("/root/py")] == ["a.txt"]
    assert sbx.files.exists("/root/py/a.txt")
    sbx.files.rename("/root/py/a.txt", "/root/py/b.txt")
    assert not sbx.files.exists("/root/py/a.txt")
    sbx.files.remove("/root/py/b.txt")
    assert sbx.files.list("/root/py") == []


def test_pause_connect_keeps_files() -> None:
    s = Sandbox.create("base", timeout=300, metadata={"suite": TAG, "role": "pause"})
    try:
        s.files.write("/root/keep.txt", "survives pause")
        s.pause()
        assert s.get_info().state == "paused"
        assert not s.is_running()
        again = Sandbox.connect(s.sandbox_id)
        assert again.is_running()
        assert again.files.read("/root/keep.txt") == "survives pause"
        assert again.commands.run("echo alive").stdout == "alive\n"
    finally:
        s.kill()


def test_list_by_metadata(sbx: Sandbox) -> None:
    ids = [i.sandbox_id for i in Sandbox.list(query=SandboxQuery(metadata={"suite": TAG})).next_items()]
    assert sbx.sandbox_id in ids


def test_kill_then_gone() -> None:
    s = Sandbox.create("busybox", timeout=120)
    assert s.kill()
    assert not Sandbox.kill(s.sandbox_id)  # already gone: False, as against E2B
    with pytest.raises(NotFoundException):
        Sandbox.connect(s.sandbox_id)
