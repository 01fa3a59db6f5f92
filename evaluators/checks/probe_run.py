"""Runs one probe on its page under its limits: the time limit, grown by the CPU waits of a
browser that runs alone, and a watchdog that ends it when the loaded page stops answering.

`score` builds the page and the runner and turns what comes back into the verdict record;
this module decides only how the run ended (passed, a step's failure, a time-out, a hang).
"""

from __future__ import annotations

import asyncio
from typing import Callable

from evaluators.aio import cancel_and_wait
from evaluators.checks.probes import ProbeRunner, StepFailure
from evaluators.checks.runtime_gate import RuntimeGate
from evaluators.checks.steps import ProbeError
from evaluators.contract import Reason
from evaluators.sandbox.browser import monotonic_ms
from evaluators.sandbox.coverage import Coverage
from evaluators.sandbox.loading import BusyPage, answers


class _GateFailed(Exception):
    """Gate E failed on the probe's page and the rubrics are not to be run."""


class ProbeTimeout(StepFailure):
    """The whole probe ran past its time limit."""


class PageHang(StepFailure):
    """The probe's watchdog: the loaded page left a trivial script unanswered for
    `hang_timeout_ms` (and, alone, the time its browser waited for a CPU meanwhile)."""


async def run_probe(runner: ProbeRunner, cov: Coverage | None, gate: RuntimeGate | None,
                    hang_timeout_ms: int, limit_ms: float,
                    waits: Callable[[], float] | None = None
                    ) -> tuple[StepFailure | None, ProbeError | None]:
    """Loads and runs the probe under its time limit (grown by the CPU waits `waits` reads,
    `_within`). Returns (failure, error): at most one is set. A gate failure that stops the
    probe returns (None, None) with the gate decided."""
    run = asyncio.ensure_future(_guarded(runner, hang_timeout_ms, cov, gate, waits))
    try:
        ended = await _within(run, runner, limit_ms, waits)
    finally:
        if not run.done():
            await cancel_and_wait(run)
    if not ended:
        runner.watch.hung = True
        return await _timeout_failure(runner, limit_ms), None
    try:
        run.result()
    except StepFailure as f:
        return f, None
    except ProbeError as e:
        return None, e
    except _GateFailed:
        pass
    return None, None


async def _within(run: asyncio.Future, runner: ProbeRunner, limit_ms: float,
                  waits: Callable[[], float] | None) -> bool:
    """Waits for `run` until the probe's time limit; whether it ended by then.

    With `waits` (`processes.cpu_wait_clock`), the limit grows by the time the browser's
    processes waited for a CPU meanwhile, up to one more limit: on a loaded machine the
    same app then gets the same time to run as on an idle one, so its verdict does not
    depend on what else the machine ran. The probe's deadline moves with it.
    """
    left, grown = limit_ms / 1000, 0.0
    while True:
        done, _ = await asyncio.wait({run}, timeout=left)
        if done:
            return True
        if waits is None:
            return False
        lost = min(limit_ms / 1000, waits())
        if lost - grown < 0.05:
            return False
        runner.extend((lost - grown) * 1000)
        left, grown = lost - grown, lost


async def _timeout_failure(runner: ProbeRunner, limit_ms: float) -> StepFailure:
    """The failure of a probe that ran out of time.

    A step waiting for an element (with no action timeout, as Playwright's runner) waits
    until the probe's time limit; when no element matches its locator, that is the failure:
    the element is missing, however fast the CPU. Anything else may have been CPU
    starvation (`ProbeTimeout`, which a rerun alone can tell).
    """
    message = f"the probe timed out after {limit_ms} ms"
    if runner.extended_ms:
        message += f" and {runner.extended_ms:.0f} ms more its browser waited for a CPU"
    i = runner.watch.step
    step = runner.steps[i] if runner.loaded and i is not None else {}
    spec = runner.step_locator(step)
    if spec is not None:
        try:
            count = await asyncio.wait_for(runner.locator(spec).count(), 2.0)
        except Exception:  # noqa: BLE001 - a page that cannot answer: not known missing
            count = None
        if count == 0:
            failure = runner.missing(spec, f"{message} waiting for it", step)
            failure.limit_ms = limit_ms
            return failure
    failure = ProbeTimeout(message, "severe", reason=Reason.TIMEOUT)
    failure.limit_ms = limit_ms
    return failure


async def _load_and_run(runner: ProbeRunner, cov: Coverage | None,
                        gate: RuntimeGate | None) -> None:
    left = runner.deadline - monotonic_ms()
    if gate is not None:
        left = min(left, gate.cfg.browser.load_timeout_ms)
    await runner.load(left)
    if gate is not None and not await gate.after_load(runner.page, runner.watch) and \
            not gate.cfg.run_rubrics_after_gate_failure:
        raise _GateFailed
    if cov is not None:
        await cov.take()  # resets the counts: what follows is the probe's own path
    await runner.run()


async def _watchdog(runner: ProbeRunner, hang_timeout_ms: int,
                    waits: Callable[[], float] | None = None) -> None:
    """Ends the probe once the loaded page stops answering, as gate E measures it: its main
    thread spent `busy_limit_ms` of CPU without answering (a StepFailure: it hung by itself,
    however loaded the machine), or no answer came in `hang_timeout_ms` plus, with `waits`,
    the time its browser waited for a CPU meanwhile (`PageHang`: decided again alone when
    the CPU was contended)."""
    while True:
        await asyncio.sleep(1.0)
        if not runner.loaded:
            continue  # the load has its own timeout
        # Watched by whether it loaded, not by its URL: history.replaceState('#x') (or any
        # same-origin path) changes the URL of a page that is still the app.
        try:
            await answers(runner.page, runner.watch, hang_timeout_ms, runner.busy_limit_ms, waits)
        except asyncio.TimeoutError:
            runner.watch.hung = True
            raise PageHang(f"the page stopped answering (no reply in {hang_timeout_ms} ms): "
                            "an infinite loop?", "severe", reason=Reason.HANG) from None
        except BusyPage as e:
            raise StepFailure(f"the page stopped answering ({e})", "severe",
                              reason=Reason.HANG) from None
        except Exception:  # noqa: BLE001 - a closed or crashed page is reported elsewhere
            return


async def _guarded(runner: ProbeRunner, hang_timeout_ms: int, cov: Coverage | None,
                   gate: RuntimeGate | None, waits: Callable[[], float] | None = None) -> None:
    """Runs the probe while a watchdog ends it early if the page hangs."""
    probe = asyncio.ensure_future(_load_and_run(runner, cov, gate))
    dog = asyncio.ensure_future(_watchdog(runner, hang_timeout_ms, waits))
    try:
        done, _ = await asyncio.wait({probe, dog}, return_when=asyncio.FIRST_COMPLETED)
        if probe in done:
            return probe.result()
        dog.result()  # raises the hang
        return await probe  # the watchdog gave up on a closed page: the probe reports
    finally:
        # Not gather(): a cancel can be swallowed by the watchdog's wait_for (`aio`). Shielded:
        # the caller cancels this again every half second (`cancel_and_wait`), and an ending
        # cut short would leave the probe running, its exception never retrieved.
        ending = asyncio.ensure_future(cancel_and_wait(probe, dog))
        try:
            still = await asyncio.shield(ending)
        except asyncio.CancelledError:
            runner.watch.hung = True  # it may still act on the page: close it, never reuse it
            raise
        if still:
            runner.watch.hung = True
