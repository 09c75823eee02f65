"""The real `e2b-code-interpreter` Python SDK (pinned in requirements.txt)
against a real ptd (see ci_test.go, TestPythonSDK), told only E2B_API_URL,
E2B_SANDBOX_URL and E2B_API_KEY: state across cells, a PNG that Pillow
decodes, a DataFrame, an exception, streamed stdout, the callbacks, SVG and
JSON results, a timeout, contexts, a kernel crash, the async client."""

from __future__ import annotations

import base64
import io
import time
from typing import Iterator

import pytest
from PIL import Image
from e2b import TimeoutException
from e2b_code_interpreter import AsyncSandbox, Sandbox


@pytest.fixture(scope="module")
def sbx() -> Iterator[Sandbox]:
    s = Sandbox.create(timeout=600)
    try:
        yield s
    finally:
        s.kill()


def test_create_names_the_code_interpreter_template(sbx: Sandbox) -> None:
    assert sbx.get_info().template_id == "code-interpreter"


def test_state_persists(sbx: Sandbox) -> None:
    sbx.run_code("x = 41")
    ex = sbx.run_code("x + 1")
    assert ex.error is None
    assert ex.text == "42"
    assert (ex.execution_count or 0) >= 2


def test_matplotlib_png_decodes(sbx: Sandbox) -> None:
    ex = sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()")
    assert ex.error is None, ex.error and ex.error.traceback
    png = next((r.png for r in ex.results if r.png), None)
    assert png, f"no png among {[r.formats() for r in ex.results]}"
    img = Image.open(io.BytesIO(base64.b64decode(png)))
    assert img.format == "PNG"
    img.load()  # decodes every pixel
    assert img.size[0] >= 100 and img.size[1] >= 100, img.size


def test_dataframe_is_html(sbx: Sandbox) -> None:
    ex = sbx.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    main = next(r for r in ex.results if r.is_main_result)
    assert "<table" in (main.html or "") and "<td>x</td>" in (main.html or "")


def test_error_with_traceback_and_the_context_survives(sbx: Sandbox) -> None:
    ex = sbx.run_code("1/0")
    assert ex.error is not None
    assert ex.error.name == "ZeroDivisionError"
    assert "division by zero" in ex.error.value
    assert "ZeroDivisionError" in ex.error.traceback
    assert sbx.run_code("x * 2").text == "82"


def test_stdout_streams_before_the_cell_ends(sbx: Sandbox) -> None:
    seen: list[tuple[str, float]] = []
    ex = sbx.run_code("import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')",
                      on_stdout=lambda m: seen.append((m.line, time.monotonic())))
    end = time.monotonic()
    assert [line.strip() for line, _ in seen] == ["first", "second"]
    assert [s.strip() for s in ex.logs.stdout] == ["first", "second"]
    assert end - seen[0][1] >= 1.0, "the first line arrived only when the cell ended"


def test_callbacks_svg_json_and_stderr(sbx: Sandbox) -> None:
    seen: list[str] = []
    ex = sbx.run_code(
        "import sys\nfrom IPython.display import display, SVG, JSON\nprint('out', flush=True)\n"
        "print('err', file=sys.stderr, flush=True)\n"
        "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"2\" height=\"2\"/></svg>'))\n"
        "display(JSON({'k': [1, 2]}))\nraise ValueError('late')",
        on_stdout=lambda m: seen.append("stdout " + m.line.strip()),
        on_stderr=lambda m: seen.append("stderr " + m.line.strip()),
        on_result=lambda r: seen.append("result " + "+".join(f for f in r.formats() if f != "text")),
        on_error=lambda e: seen.append("error " + e.name),
    )
    assert seen == ["stdout out", "stderr err", "result svg", "result json", "error ValueError"]
    assert [s.strip() for s in ex.logs.stderr] == ["err"]
    assert "<rect" in (ex.results[0].svg or "")
    assert ex.results[1].json == {"k": [1, 2]}
    assert ex.error is not None and ex.error.value == "late"


def test_timeout_interrupts_and_keeps_variables(sbx: Sandbox) -> None:
    sbx.run_code("kept = 'still here'")
    with pytest.raises(TimeoutException):
        sbx.run_code("while True:\n    pass", timeout=2)
    # The server interrupts the kernel when the SDK goes away; until it has,
    # the context is busy with the old cell.
    for _ in range(20):
        ex = sbx.run_code("kept")
        if ex.error is None:
            break
        time.sleep(0.25)
    assert ex.text == "'still here'"


def test_contexts_do_not_share_state(sbx: Sandbox) -> None:
    sbx.run_code("only_in_default = 1")
    assert sbx.run_code("only_in_default").text == "1"
    ctx = sbx.create_code_context(language="python")
    assert sbx.run_code("'only_in_default' in globals()", context=ctx).text == "False"
    sbx.run_code("only_in_ctx = 2", context=ctx)
    assert sbx.run_code("'only_in_ctx' in globals()").text == "False"
    assert ctx.id in [c.id for c in sbx.list_code_contexts()]
    sbx.remove_code_context(ctx)
    sbx.run_code("let n = 20", language="javascript")
    assert sbx.run_code("n + 1", language="javascript").text == "21"


def test_envs_apply_to_one_cell(sbx: Sandbox) -> None:
    assert sbx.run_code("import os\nos.environ.get('PY_E2B')", envs={"PY_E2B": "yes"}).text == "'yes'"
    assert sbx.run_code("import os\nstr(os.environ.get('PY_E2B'))").text == "'None'"


def test_kernel_crash_is_said_on_stderr(sbx: Sandbox) -> None:
    ctx = sbx.create_code_context()
    sbx.run_code("doomed = 1", context=ctx)
    died = sbx.run_code("import os\nos._exit(3)", context=ctx)
    assert died.error is not None and died.error.name == "KernelDied"
    nxt = sbx.run_code("'doomed' in globals()", context=ctx)
    assert nxt.text == "False"
    assert "".join(nxt.logs.stderr).startswith("[platinum] the kernel died")
    assert sbx.run_code("1", context=ctx).logs.stderr == []
    sbx.remove_code_context(ctx)


async def _async_case() -> None:
    s = await AsyncSandbox.create(timeout=300)
    try:
        await s.run_code("y = 6")
        ex = await s.run_code("y * 7")
        assert ex.text == "42"
    finally:
        await s.kill()


def test_async_sandbox() -> None:
    import asyncio

    asyncio.run(_async_case())
