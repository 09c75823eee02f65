"""Run code against a real ptd: state across cells, rich results, a
cell's error as data, streamed output, the cell's own timeout, contexts,
the async client, and refusals that raise."""

from __future__ import annotations

import time
from typing import Iterator

import pytest

from platinum import AsyncPlatinum, CodeContext, InvalidRequestError, NotFoundError, Platinum, Result, Sandbox

from conftest import need_ptd


@pytest.fixture(scope="module")
def ci() -> Iterator[Sandbox]:
    """One code-interpreter sandbox for the module (a kernel starts in
    about a second; state carried between tests is named per test)."""
    need_ptd()
    with Platinum(poll_interval=0.2) as c:
        sbx = c.sandboxes.create(template="code-interpreter", wait_for_running=True, timeout=300)
        try:
            yield sbx
        finally:
            c.sandboxes.delete(sbx.id)


def test_state_persists_across_cells(ci: Sandbox) -> None:
    ci.run_code("x = 41")
    ex = ci.run_code("x + 1")
    assert ex.text == "42"
    assert ex.error is None
    assert ex.status == "ok"
    assert ex.context_id == "ctx_default_python"
    assert (ex.execution_count or 0) >= 2


def test_png_and_html_results(ci: Sandbox) -> None:
    seen: list[Result] = []
    ex = ci.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()", on_result=seen.append)
    png = next(r.bytes("image/png") for r in ex.results if r.png)
    assert png is not None and png[:4] == b"\x89PNG"
    assert len(seen) == len(ex.results)
    df = ci.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    main = next(r for r in df.results if r.is_main_result)
    assert "<table" in (main.html or "")


def test_error_is_data_and_context_survives(ci: Sandbox) -> None:
    names: list[str] = []
    ex = ci.run_code("1/0", on_error=lambda e: names.append(e.name))
    assert ex.error is not None and ex.error.name == "ZeroDivisionError"
    assert "ZeroDivisionError" in ex.error.traceback
    assert ex.status == "error"
    assert names == ["ZeroDivisionError"]
    assert ci.run_code("x").text == "41"


def test_stdout_streams_before_the_cell_ends(ci: Sandbox) -> None:
    first: list[float] = []
    ex = ci.run_code("import time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('two')",
                     on_stdout=lambda _: first.append(time.monotonic()))
    end = time.monotonic()
    assert ex.stdout == "one\ntwo\n"
    assert first and end - first[0] >= 1.0, "the first line arrived only when the cell ended"


def test_cell_timeout_interrupts_and_keeps_state(ci: Sandbox) -> None:
    ex = ci.run_code("while True: pass", timeout_ms=2000)
    assert ex.error is not None and ex.error.name == "TimeoutError"
    assert ex.status == "timeout"
    assert ci.run_code("x * 2").text == "82"


def test_contexts_do_not_share_state(ci: Sandbox) -> None:
    ci.run_code("only_in_default = 1")
    assert ci.run_code("only_in_default").text == "1"
    c = ci.code_contexts.create(language="python")
    assert isinstance(c, CodeContext) and c.id.startswith("ctx_")
    assert ci.run_code("'only_in_default' in globals()", context=c).text == "False"
    ci.run_code("only_in_ctx = 2", context=c)
    assert ci.run_code("'only_in_ctx' in globals()").text == "False"
    assert c.id in [x.id for x in ci.code_contexts.list()]
    ci.run_code("y = 5", context=c.id)
    ci.code_contexts.restart(c)
    assert ci.run_code("'y' in globals()", context=c).text == "False"
    ci.code_contexts.delete(c)
    with pytest.raises(NotFoundError):
        ci.run_code("1", context=c)
    ci.run_code("let n = 20", language="javascript")
    assert ci.run_code("n + 1", language="javascript").text == "21"


def test_env_is_per_cell_and_bad_input_raises(ci: Sandbox) -> None:
    assert ci.run_code("import os\nos.environ.get('PY_CELL')", env={"PY_CELL": "yes"}).text == "'yes'"
    assert ci.run_code("import os\nstr(os.environ.get('PY_CELL'))").text == "'None'"
    with pytest.raises(InvalidRequestError):
        ci.run_code("1", timeout_ms=-1)


@pytest.mark.asyncio
async def test_async_run_code(ci: Sandbox) -> None:
    async with AsyncPlatinum(poll_interval=0.2) as c:
        sbx = await c.sandboxes.get(ci.id)
        out: list[str] = []
        ex = await sbx.run_code("print('async')\n6 * 7", on_stdout=out.append)
        assert ex.text == "42"
        assert out == ["async\n"]
        ctx = await sbx.code_contexts.create(language="bash")
        assert (await sbx.run_code("echo $((2 + 3))", context=ctx)).stdout == "5\n"
        await sbx.code_contexts.delete(ctx)
