"""Gate E: the app loads, settles, answers and throws nothing while loading.

Decided on the first probe's page right after it loads (`RuntimeGate`), or on a page of its
own (`check_runtime`) for a response with no probe and for a gate decided again alone
(`score._decide_runtime`).
"""

from __future__ import annotations

import asyncio
from typing import Callable

from playwright.async_api import Page

from evaluators.checks.diagnostics import Frames, caused, error_diagnostic, watch_diagnostics
from evaluators.checks.extract import Extraction
from evaluators.config import EvalConfig
from evaluators.contract import Diagnostic, Reason
from evaluators.sandbox.browser import BrowserWorker, EvaluatorFault, PageWatch, check_not_killed
from evaluators.sandbox.loading import BusyPage, LeftWhileLoading, answers, load_app
from evaluators.sandbox.processes import cpu_wait_clock


class RuntimeGate:
    """Gate E, decided on a page right after it loads, before anything acts on it.

    The gate needs a freshly loaded page left alone for `settle_ms`, and the first probe's
    page is exactly that until its first step runs; so the gate is decided there and the
    probe then goes on, instead of loading the app once more on a page of its own (a page
    load is most of a short probe's CPU). A response with no probe gets a page of its own
    (`check_runtime`).
    """

    def __init__(self, cfg: EvalConfig, frames: Frames):
        self.cfg, self.frames = cfg, frames
        self.result: asyncio.Future = asyncio.get_running_loop().create_future()
        # Failed by a time limit (load, hang) while other pages of the browser were open,
        # or the CPU was contended: the page may only have been starved (`_decide_runtime`).
        self.contended_timeout = False

    @property
    def decided(self) -> bool:
        return self.result.done()

    async def after_load(self, page: Page, watch: PageWatch,
                         waits: Callable[[], float] | None = None) -> bool:
        """Lets the loaded page settle, asks it to answer, decides. Returns whether it passed.

        With `waits` (a page alone), the time its browser waited for a CPU meanwhile is
        given back to the answer's time limit (`loading.answers`)."""
        b = self.cfg.browser
        await asyncio.sleep(b.settle_ms / 1000)
        failure, reason = None, None
        try:
            await answers(page, watch, b.hang_timeout_ms, b.busy_limit_ms, waits)
        except asyncio.TimeoutError:
            failure = f"the page stopped answering after load (no reply in {b.hang_timeout_ms} ms)"
            reason = Reason.HANG
        except BusyPage as e:
            failure, reason = f"the page stopped answering after load ({e})", Reason.HANG
        except Exception as e:  # noqa: BLE001
            if not watch.crashed and not page.context.browser.is_connected():
                raise EvaluatorFault(f"browser died during the load check: {e}") from e
        await check_not_killed(watch, b.answer_timeout_s)
        return self.decide(watch, failure, reason)

    def decide(self, watch: PageWatch, failure: str | None, reason: Reason | None = None) -> bool:
        """Decides the gate from what the page did while loading (once; later calls read it).

        Args:
          failure: What stopped the page, for people; None when nothing did.
          reason: Why, for the readers (`LOAD_FAILED` unless given).
        """
        if self.result.done():
            return self.result.result()[0]
        if watch.crashed:
            failure, reason = "the renderer crashed", Reason.CRASH
        diags = [error_diagnostic(e, self.frames, "runtime", None) for e in watch.errors
                 if e["interaction_index"] is None]
        cause = None
        if failure is None and diags:
            failure = "uncaught exception during load: " + diags[0]["message"]
            reason, cause = Reason.UNCAUGHT_AT_LOAD, diags[0]
        diags.extend(watch_diagnostics(watch, "runtime", None))
        if failure is not None:
            # A busy page spent the CPU it was given: starvation did not stop it.
            self.contended_timeout = (watch.hung and (watch.shared or watch.starved())
                                      and not watch.crashed and not watch.busy)
            gate = Diagnostic(kind="runtime_failure", reason=reason or Reason.LOAD_FAILED,
                              stage="runtime", severity="severe", message=failure).to_json()
            diags.insert(0, caused(gate, cause))
        self.result.set_result((failure is None, diags))
        return failure is None

    def give_up(self, error: BaseException) -> None:
        """The page the gate was to be decided on failed the evaluator itself."""
        if not self.result.done():
            self.result.set_exception(error)


async def check_runtime(worker: BrowserWorker, extraction: Extraction, cfg: EvalConfig,
                        frames: Frames, alone: bool = False) -> RuntimeGate:
    """Gate E on a page of its own (for a response none of whose rubrics has a probe, and
    for a gate decided again alone), returned decided.

    With `alone`, no other page of the browser is open while it is decided.
    """
    b = cfg.browser
    gate = RuntimeGate(cfg, frames)
    async with worker.page(extraction.code, alone=alone) as (page, watch, _):
        waits = cpu_wait_clock(watch.browser_pid) if alone else None
        try:
            await load_app(page, watch, b.load_timeout_ms, b.busy_limit_ms, waits)
        except BusyPage as e:
            gate.decide(watch, f"the page did not load ({e})", Reason.LOAD_FAILED)
        except LeftWhileLoading as e:
            gate.decide(watch, f"the page did not load (it left for {str(e)[:300]} while "
                               "loading; the sandbox blocked that navigation)", Reason.LOAD_FAILED)
        except Exception as e:  # noqa: BLE001 - Playwright timeout or navigation error
            watch.hung = True
            await check_not_killed(watch, b.answer_timeout_s)
            gate.decide(watch, f"the page did not load within {b.load_timeout_ms} ms "
                               f"({str(e).splitlines()[0][:200]})", Reason.LOAD_FAILED)
        if not gate.decided:
            await gate.after_load(page, watch, waits)
    return gate

