"""How a crashed page's end is decided (`browser.check_not_killed`), without a browser: the
app's failure only when Chromium says the renderer crashed by itself."""

from __future__ import annotations

import asyncio

import pytest

from evaluators.sandbox.browser import EvaluatorFault, PageWatch, check_not_killed


def _decide(status: str | None, after_s: float, wait_s: float) -> str:
    async def run() -> str:
        watch = PageWatch(crashed=True)
        if status is not None:
            asyncio.get_running_loop().call_later(after_s, setattr, watch, "crash_status", status)
        try:
            await check_not_killed(watch, wait_s)
        except EvaluatorFault as e:
            return f"evaluator: {e}"
        return "app"
    return asyncio.run(run())


@pytest.mark.parametrize("status", ["crashed", "oom"])
def test_a_renderer_that_crashed_by_itself_is_the_apps_failure(status):
    assert _decide(status, 0.3, 5.0) == "app"


def test_a_renderer_killed_by_a_signal_is_the_evaluators_even_when_said_late():
    assert _decide("killed", 0.5, 5.0).startswith("evaluator: the page's renderer was killed")


def test_a_crash_the_browser_never_explains_is_not_blamed_on_the_app():
    # Before, a report that had not come within 2 s left the crash to the app.
    got = _decide(None, 0.0, 0.5)
    assert got.startswith("evaluator: the browser did not say within 0.5 s"), got


def test_a_page_that_did_not_crash_is_decided_at_once():
    async def run() -> None:
        await asyncio.wait_for(check_not_killed(PageWatch(), 30.0), 0.1)
    asyncio.run(run())
