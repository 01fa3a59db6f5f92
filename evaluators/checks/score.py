"""Scores one response: gates F, S, E, then every rubric probe.

The output record is an interface (localization and training read it); its
JSON Schema is `evaluators/schema/result.schema.json` and docs/result-record.md
describes it.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from typing import NamedTuple

from evaluators.sandbox.browser import (BrowserWorker, EvaluatorFault, PageWatch, check_not_killed,
                                        monotonic_ms)
from evaluators.aio import cancel_and_wait
from evaluators.checks.runtime_gate import RuntimeGate, check_runtime
from evaluators.config import EvalConfig
from evaluators.contract import SCHEMA_VERSION, Diagnostic, Reason
from evaluators.sandbox.coverage import Coverage
from evaluators.sandbox.processes import cpu_wait_clock
from evaluators.sandbox.writers import read_writers
from evaluators.checks.diagnostics import (Frames, caused, error_diagnostic, failure_diagnostic,
                                   link_causes, watch_diagnostics)
from evaluators.checks.extract import Extraction, extract_app
from evaluators.checks.probe_run import PageHang, ProbeTimeout, run_probe
from evaluators.checks.probes import ProbeRunner, StepFailure
from evaluators.checks.record import Kept, error_record, merge
from evaluators.checks.record import verdict as _verdict
from evaluators.checks.reward import gated_reward
from evaluators.checks.source import Deadline, SourceTimeout, source_diagnostics
from evaluators.checks.steps import ProbeError, check_probe, compared_saves, eval_locators
from evaluators.tasks import Rubric, Task


class ProbeOutcome(NamedTuple):
    """One probe's result.

    Attributes:
      record: the rubric's verdict record.
      diagnostics: its diagnostics.
      timed_out: the probe ran out of time, or its watchdog found the page not answering.
      contended: it did so while another page of the browser was open, or while tasks on
        the machine waited for a CPU (`PageWatch.starved`): the time limit, or the page's
        time to answer, may have been spent waiting for the CPU.
      hung: it was the watchdog (the page stopped answering), not the time limit.
    """

    record: dict
    diagnostics: list[dict]
    timed_out: bool = False
    contended: bool = False
    hung: bool = False


async def run_rubric(worker: BrowserWorker, rubric: Rubric, extraction: Extraction,
                     cfg: EvalConfig, frames: Frames, gate: RuntimeGate | None = None,
                     alone: bool = False) -> ProbeOutcome | None:
    """Runs one rubric's probe on a fresh page.

    With `gate`, gate E is decided on this page between its load and the first step (the
    probe's time limit grows by the settling time, so its steps get the time they always
    had); when the gate fails and rubrics are not run after a gate failure, the probe stops
    there and None is returned. With `alone`, no other page of the browser is open while
    the probe runs.
    """
    if rubric.probe is None:
        return ProbeOutcome(
            _verdict(rubric, "unjudged", message="no probe: a judge must score this rubric"), [])
    try:
        check_probe(rubric.probe)
    except ProbeError as e:
        return ProbeOutcome(_verdict(rubric, "error", failed_step=e.step_index,
                                     message=f"malformed probe: {e}", error_source="probe"), [])
    try:
        return await _probe_on_page(worker, rubric, extraction, cfg, frames, gate, alone)
    except BaseException as e:
        # Whatever ended the probe before gate E was decided decides nothing: the scorer
        # waiting for the gate gets the exception instead (a no-op once it is decided).
        if gate is not None:
            gate.give_up(e)
        raise


async def _probe_on_page(worker: BrowserWorker, rubric: Rubric, extraction: Extraction,
                         cfg: EvalConfig, frames: Frames, gate: RuntimeGate | None,
                         alone: bool) -> ProbeOutcome | None:
    """run_rubric's probe, on a page of the worker (its arguments, the probe well-formed)."""
    b = cfg.browser
    limit_ms = b.probe_time_limit_ms + (b.settle_ms if gate is not None else 0)
    async with worker.page(extraction.code, alone=alone) as (page, watch, context):
        t0 = time.perf_counter()
        runner = ProbeRunner(page, watch, rubric.probe, b.action_timeout_ms,
                             monotonic_ms() + limit_ms, decide_when_quiet=b.decide_when_quiet,
                             busy_limit_ms=b.busy_limit_ms, one_trip=b.one_trip_actions,
                             hang_timeout_ms=b.hang_timeout_ms)
        cov = None
        if b.coverage:
            cov = Coverage()
            # No app has run on the page yet: one that does not answer is ours (its renderer
            # died; Chromium never answers a CDP call to a dead renderer's domains).
            try:
                await asyncio.wait_for(cov.start(context, page), b.answer_timeout_s)
            except asyncio.TimeoutError as e:
                raise EvaluatorFault("the page did not answer as coverage started") from e
        # Alone, the browser's renderers and GPU process serve this page only: the time
        # they waited for a CPU is time the app lost, not time it spent.
        waits = cpu_wait_clock(watch.browser_pid) if alone else None
        failure, error = await run_probe(runner, cov, gate, b.hang_timeout_ms, limit_ms, waits)
        if failure is not None and not watch.crashed and not context.browser.is_connected():
            raise EvaluatorFault("the browser died while a probe ran")
        await check_not_killed(watch, b.answer_timeout_s)
        if gate is not None and _gate_stops(gate, runner, failure, cfg):
            if cov is not None:
                await cov.stop()
            return None
        if watch.crashed and failure is not None:
            failure = StepFailure(f"the renderer crashed: {failure}", "severe",
                                  reason=Reason.CRASH)
        covered = None
        wanted = failure is not None or (b.coverage_passing and error is None)
        if cov is not None and wanted and not watch.crashed:
            covered = await _read_coverage(cov, extraction, frames)
        if cov is not None:
            await cov.stop()
        writes = None
        if b.trace_writers and failure is not None and not watch.crashed and not watch.hung:
            writes = await _writers(runner, frames)
        duration = round((time.perf_counter() - t0) * 1000, 1)
        # Load-time errors repeat on every fresh page and were reported by gate
        # E; keep the ones an interaction triggered.
        errors = [e for e in watch.errors if e["interaction_index"] is not None]
        diags = [error_diagnostic(e, frames, "rubric", rubric.id) for e in errors]
        diags.extend(d for d in watch_diagnostics(watch, "rubric", rubric.id)
                     if d.get("kind") != "blocked_request" and d.get("kind") != "cdn_fallback")
    rec, failed = _probe_record(rubric, watch, failure, error, errors, duration, covered)
    if failed is not None and writes is not None:
        failed["writers"] = writes
    # A page busy computing for seconds at each step is stretched past the watchdog's
    # measure by a loaded CPU as surely as past the time limit: both are decided again alone.
    timed_out = isinstance(failure, (ProbeTimeout, PageHang)) and not watch.crashed
    # Read only for a timeout (a /proc read per probe otherwise spent for nothing).
    contended = timed_out and not alone and (watch.shared or watch.starved())
    return ProbeOutcome(rec, ([failed] if failed else []) + diags, timed_out, contended,
                        timed_out and isinstance(failure, PageHang))


async def _writers(runner: ProbeRunner, frames: Frames) -> list[dict]:
    """The recorded writes of the element the failing step checked (`sandbox.writers`), their
    frames in response coordinates; only writes with a frame in the app are kept."""
    i = runner.watch.step
    step = runner.steps[i] if runner.loaded and i is not None else {}
    own = runner.step_locator(step)
    # For an `assert`: the elements whose saved readings it compared (for an evaluated
    # reading, those its source looks up).
    specs = [own] if own is not None else [
        spec for s in compared_saves(runner.steps, step, i)
        for spec in ([s["from"]] if s.get("from") is not None else eval_locators(s.get("eval")))
    ][:2]
    out = []
    for spec in specs:
        try:
            locator = runner.locator(spec)
        except Exception:  # noqa: BLE001 - a locator the page cannot build: no evidence
            continue
        for w in await read_writers(locator):
            mapped = frames.frames(w["frames"])
            if any(f["offset"] is not None for f in mapped):
                out.append({**w, "frames": mapped})
    return out


def _gate_stops(gate: RuntimeGate, runner: ProbeRunner, failure: StepFailure | None,
                cfg: EvalConfig) -> bool:
    """Decides gate E if the probe ended before it could be (its page did not load, hung or
    crashed), and tells whether the probe's verdict is void (the gate failed and rubrics are
    not run after a gate failure)."""
    if not gate.decided:
        _decide_unloaded(gate, runner, failure, cfg.browser.load_timeout_ms)
    return not gate.result.result()[0] and not cfg.run_rubrics_after_gate_failure


_HUNG = "the page stopped answering"


def _decide_unloaded(gate: RuntimeGate, runner: ProbeRunner, failure: StepFailure | None,
                     load_timeout_ms: int) -> None:
    """Gate E of a probe page that ended before the gate was decided (load, hang, crash)."""
    if failure is None:
        gate.decide(runner.watch, None)
        return
    message = str(failure)
    prefix = "the page did not load"
    if not runner.loaded and runner.watch.busy:
        pass  # stopped by the CPU limit, not the wall-clock one: the message says so
    elif not runner.loaded and message.startswith(prefix):
        message = f"{prefix} within {load_timeout_ms} ms ({message[len(prefix):].lstrip(': ')})"
    elif not runner.loaded:
        message = f"{prefix} ({message})"
    elif message.startswith(_HUNG):
        # The probe's own watchdog already said it stopped answering: say when, once.
        message = f"{_HUNG} after load{message[len(_HUNG):]}"
    else:
        message = f"{_HUNG} after load ({message})"
    gate.decide(runner.watch, message, Reason.LOAD_FAILED if not runner.loaded else Reason.HANG)


def _probe_record(rubric: Rubric, watch: PageWatch, failure: StepFailure | None,
                  error: ProbeError | None, errors: list[dict], duration: float,
                  covered: dict | None) -> tuple[dict, dict | None]:
    """The rubric's verdict record, and the diagnostic of its failure (None unless failed)."""
    runtime_error = rubric.importance == "core" and bool(errors)
    if error is not None:
        return _verdict(rubric, "error", failed_step=error.step_index,
                        message=f"malformed probe: {error}", error_source="probe",
                        duration_ms=duration), None
    if failure is None:
        # A passing probe's path too, for spectrum-based localization (coverage_passing).
        extra = {} if covered is None else {"coverage": covered}
        return _verdict(rubric, "pass", duration_ms=duration, runtime_error=runtime_error,
                        **extra), None
    if errors:
        failure.severity = "severe"
    step_index = watch.step
    step = rubric.probe["steps"][step_index] if step_index is not None else None
    rec = _verdict(rubric, "fail", severity=failure.severity, failed_step=step_index,
                   message=str(failure), duration_ms=duration, runtime_error=runtime_error)
    diag = failure_diagnostic(rubric, failure, step_index, step, watch)
    diag["coverage"] = covered
    return rec, diag


async def _read_coverage(cov: Coverage, extraction: Extraction, frames: Frames) -> dict | None:
    """The functions that ran since load, or None if the page cannot say (hung)."""
    try:
        raw = await asyncio.wait_for(cov.take(), 5.0)
    except Exception:  # noqa: BLE001 - coverage is evidence, never a verdict
        return None
    functions, skipped = cov.functions(raw, extraction, frames.index)
    return {"functions": functions, "skipped": skipped, "since": "load"}


def _gate_rubric(task: Task) -> int | None:
    """Index of the first rubric with a well-formed probe (its page decides gate E), or None."""
    for i, r in enumerate(task.rubrics):
        if r.probe is not None:
            try:
                check_probe(r.probe)
            except ProbeError:
                continue
            return i
    return None


def _not_run(task: Task, gate: str) -> list[dict]:
    return [_verdict(r, "unjudged" if r.probe is None else "fail", ran=False,
                     message=f"not run: the {gate} gate failed") for r in task.rubrics]


def _check_source(extraction: Extraction, cfg: EvalConfig) -> tuple[list[dict], Frames]:
    """Gate S's diagnostics (severe ones fail it) and the frame mapper, off the event loop.

    Runs in a thread: a document that takes tree-sitter long (deep nesting) must not stall
    the pages of the other apps this worker scores. The deadline starts here, in the
    thread, so time spent waiting for one is not charged to the response.
    """
    limit_ms = cfg.source_time_limit_ms
    try:
        diags = source_diagnostics(extraction, Deadline.after(limit_ms / 1000))
    except SourceTimeout as e:
        diags = [Diagnostic(kind="parse_timeout", reason=Reason.SOURCE_TIMEOUT, stage="source",
                            severity="severe", limit_ms=limit_ms,
                            message=f"{e}, the source check's time limit (the parse slows "
                                    "with the square of the nesting depth)").to_json()]
    for d in diags:
        if d["kind"] == "syntax_error":
            fatal = d["lang"] == "javascript" or cfg.reward.css_errors_fail_source
            d["severity"] = "severe" if fatal else "minor"
    return diags, Frames(extraction)


async def score_response(worker: BrowserWorker, task: Task, response: str,
                         cfg: EvalConfig, kept: Kept | None = None) -> dict:
    """Scores one response. Raises EvaluatorFault when the evaluator itself fails.

    Args:
      kept: decisions of earlier attempts (`Kept`), reused; this attempt's are added to it.

    Returns:
      The scoring fields of the output record (no input fields, no status).
    """
    kept = Kept() if kept is None else kept
    timings: dict[str, float] = {}
    t = time.perf_counter()
    extraction = extract_app(response)
    timings["format_ms"] = round((time.perf_counter() - t) * 1000, 2)
    if extraction is None:
        diag = Diagnostic(kind="no_app", reason=Reason.NO_APP, stage="format", severity="severe",
                          message="no app found: no ```html block and no HTML document in the "
                                  "response").to_json()
        return _record(task, None, "format", _not_run(task, "format"), [diag], timings, cfg)

    t = time.perf_counter()
    diags, frames = await asyncio.to_thread(_check_source, extraction, cfg)
    timings["source_ms"] = round((time.perf_counter() - t) * 1000, 2)
    gate = "source" if any(d["severity"] == "severe" for d in diags) else None
    if gate and not cfg.run_rubrics_after_gate_failure:
        return _record(task, extraction, gate, _not_run(task, gate), diags, timings, cfg)

    t = time.perf_counter()
    decided = kept.kept_gate()
    if decided is not None:
        (ok, runtime_diags, gate_rerun), first_run = decided, None
    else:
        ok, runtime_diags, first_run, gate_rerun = await _decide_runtime(
            worker, task, extraction, cfg, frames)
        if first_run is None:  # decided on pages that ended: it stands
            kept.keep_gate((ok, runtime_diags, gate_rerun))
    timings["runtime_ms"] = round((time.perf_counter() - t) * 1000, 1)
    diags.extend(runtime_diags)
    if not ok:
        gate = gate or "runtime"
        if not cfg.run_rubrics_after_gate_failure:
            if first_run is not None:
                await first_run  # stopped at the gate: it returns at once
            return _record(task, extraction, gate, _not_run(task, gate), diags, timings, cfg,
                           gate_rerun)

    t = time.perf_counter()
    first = _gate_rubric(task) if first_run is not None else None
    got = await asyncio.gather(*(
        first_run if i == first else _kept_or_run(kept, i, worker, r, extraction, cfg, frames)
        for i, r in enumerate(task.rubrics)), return_exceptions=True)
    _keep(kept, got, first, (ok, runtime_diags, gate_rerun))
    results = list(got)
    if cfg.browser.rerun_contended_timeouts:
        results = await _rerun_contended(worker, task, results, extraction, cfg, frames, kept)
    timings["rubrics_ms"] = round((time.perf_counter() - t) * 1000, 1)
    rubrics = [o.record for o in results]
    for o in results:
        diags.extend(o.diagnostics)
    if gate is None and any(r.get("runtime_error") for r in rubrics):
        gate = "runtime"
        rid = next(r["id"] for r in rubrics if r.get("runtime_error"))
        cause = next((d for d in diags if d["kind"] == "page_error" and d["rubric_id"] == rid),
                     None)
        diags.append(caused(Diagnostic(
            kind="runtime_failure", reason=Reason.UNCAUGHT_IN_STEP, stage="runtime",
            severity="severe", rubric_id=rid,
            message="uncaught exception during an interaction step of a core rubric").to_json(),
            cause))
    return _record(task, extraction, gate, rubrics, diags, timings, cfg, gate_rerun)


async def _kept_or_run(kept: Kept, i: int, worker: BrowserWorker, rubric: Rubric,
                       extraction: Extraction, cfg: EvalConfig,
                       frames: Frames) -> ProbeOutcome | None:
    """Rubric `i`'s outcome from an earlier attempt, else its probe's run now."""
    outcome = kept.kept(i)
    if outcome is not None:
        return outcome
    return await run_rubric(worker, rubric, extraction, cfg, frames)


def _keep(kept: Kept, got: list, first: int | None,
          gate: tuple[bool, list[dict], dict | None]) -> None:
    """Keeps the outcomes of the probes that ended (their pages ended cleanly), and gate E's
    decision once the page it was decided on ended; then raises the first failure."""
    for i, o in enumerate(got):
        if isinstance(o, ProbeOutcome):
            kept.keep(i, o)
    if first is not None and not isinstance(got[first], BaseException):
        kept.keep_gate(gate)
    failed = next((o for o in got if isinstance(o, BaseException)), None)
    if failed is not None:
        raise failed


async def _decide_runtime(worker: BrowserWorker, task: Task, extraction: Extraction,
                          cfg: EvalConfig, frames: Frames):
    """Gate E: on the first probe's page (which then goes on), or on a page of its own.

    A gate failed by a time limit while other pages shared the CPU is decided once more,
    alone, and that decision stands (as a probe's contended timeout is run again): a load
    or answer time-out under starvation says more about the evaluator's concurrency than
    about the app, and a real hang or an app that never loads fails alone too.

    Returns:
      (passed, diagnostics, the first probe's run still going or None, the rerun's record
      or None).
    """
    first = _gate_rubric(task)
    first_run = None
    if first is None:
        gate = await check_runtime(worker, extraction, cfg, frames)
    else:
        gate = RuntimeGate(cfg, frames)
        first_run = asyncio.ensure_future(
            run_rubric(worker, task.rubrics[first], extraction, cfg, frames, gate))
        try:
            await gate.result
        except BaseException:
            await cancel_and_wait(first_run)
            raise
    ok, diags = gate.result.result()
    if ok or not gate.contended_timeout or not cfg.browser.rerun_contended_timeouts:
        return ok, diags, first_run, None
    if first_run is not None:
        # Its page was the starved one: the probe runs afresh (if it runs at all) rather
        # than keep a verdict from that page. Stopped at the gate, it ends at once.
        if cfg.run_rubrics_after_gate_failure:
            first_run.cancel()
        await asyncio.gather(first_run, return_exceptions=True)
        first_run = None
    again = await check_runtime(worker, extraction, cfg, frames, alone=True)
    ok2, diags2 = again.result.result()
    rerun = {"reason": "timed out while other pages or other work shared the CPU; "
                       "decided again alone",
             "first_message": diags[0]["message"]}
    return ok2, diags2, first_run, rerun


async def _rerun_contended(worker: BrowserWorker, task: Task, results: list[ProbeOutcome],
                           extraction: Extraction, cfg: EvalConfig, frames: Frames,
                           kept: Kept) -> list[ProbeOutcome]:
    """Runs once more, alone in the browser, each probe that timed out (or whose page stopped
    answering) beside other pages.

    A heavy app's probes side by side can starve each other past the time limit where
    one alone passes, and a page computing for seconds at each step past the watchdog's
    measure; either then says more about the evaluator's concurrency than about the app.
    The second run's verdict stands, and the record says so (`rerun`). Once a rerun times
    out alone too, the app is slow by itself and its other timeouts stand (a run alone
    holds the whole browser for up to a time limit).
    """
    for i, outcome in enumerate(results):
        if not outcome.contended:
            continue
        again = await run_rubric(worker, task.rubrics[i], extraction, cfg, frames, alone=True)
        first = outcome.record
        again.record["rerun"] = {
            "reason": ("stopped answering" if outcome.hung else "timed out")
                      + " while other pages or other work shared the CPU; run again alone",
            "first_message": first["message"], "first_duration_ms": first.get("duration_ms")}
        results[i] = again
        kept.keep(i, again)
        if again.timed_out:
            break
    return results


def _record(task: Task, extraction: Extraction | None, gate: str | None, rubrics: list[dict],
            diags: list[dict], timings: dict, cfg: EvalConfig,
            gate_rerun: dict | None = None) -> dict:
    counts = {v: sum(r["verdict"] == v for r in rubrics) for v in ("pass", "fail", "error", "unjudged")}
    link_causes(diags)
    extra = {} if gate_rerun is None else {"runtime_rerun": gate_rerun}
    return {**extra,
        "reward": round(gated_reward(gate, rubrics, cfg.reward), 6),
        "gate": gate,
        "status": "ok",
        "rubrics": rubrics,
        "rubric_counts": counts,
        "diagnostics": diags,
        "extraction": None if extraction is None else {
            "start": extraction.start, "end": extraction.end, "method": extraction.method},
        "timings": timings,
        "schema_version": SCHEMA_VERSION,
    }


async def score_with_retries(worker: BrowserWorker, task: Task | None, row: dict,
                             cfg: EvalConfig) -> dict:
    """Scores one input row; always returns exactly one record, never raises."""
    if task is None:
        rec = error_record(None, f"unknown task_id {row.get('task_id')!r}")
        return merge(row, {**rec, "attempts": 0})
    last, kept, attempt, barren, faults = "", Kept(), 0, 0, []
    # An attempt that kept a decision moved the row forward and is not counted against
    # `retries`; there can be at most one such attempt per rubric and one for gate E.
    while barren <= cfg.retries:
        attempt, before = attempt + 1, len(kept)
        t0 = time.perf_counter()
        try:
            out = await score_response(worker, task, row["response"], cfg, kept)
            out["timings"]["total_ms"] = round((time.perf_counter() - t0) * 1000, 1)
            out["attempts"] = attempt
            if faults:  # why the row took more than one attempt: an operator's first question
                out["faults"] = faults
            return merge(row, out)
        except EvaluatorFault as e:
            last = f"evaluator fault: {e}"
        except Exception:  # noqa: BLE001 - whatever broke is ours, not the response's
            last = "evaluator exception:\n" + traceback.format_exc(limit=8)
        faults.append({"attempt": attempt, "message": last})
        barren += len(kept) == before
    return merge(row, {**error_record(task, last), "attempts": attempt, "faults": faults})
