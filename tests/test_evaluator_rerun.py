"""Probes that time out beside other pages run once more alone; pages alone are alone."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
import time

import jsonschema
import pytest

from evaluators.sandbox.browser import BrowserWorker
from evaluators.config import EvalConfig
from evaluators.fleet.pool import make_mirror, score_rows_async
from evaluators.tasks import load_responses, load_tasks, parse_task

pytestmark = pytest.mark.browser
EXAMPLES = Path(__file__).resolve().parents[1] / "evaluators" / "examples"
TASKS = load_tasks(EXAMPLES / "tasks.jsonl")
GOOD = {r["model"]: r for r in load_responses(EXAMPLES / "responses.jsonl", TASKS)}["correct"]
CFG = EvalConfig()
CFG = dataclasses.replace(CFG, browser=dataclasses.replace(
    CFG.browser, load_timeout_ms=5000, probe_time_limit_ms=1500, hang_timeout_ms=8000,
    pages_per_worker=4, decide_when_quiet=False))
# Waits past the 1.5 s time limit, however fast the machine: it times out every time (with
# quiet-page decisions off: on the quiet counter page they would skip the wait).
SLOW = {"steps": [{"wait_ms": 2500}, {"expect": "text", "locator": "#count", "value": "0"}]}
FAST = {"steps": [{"expect": "text", "locator": "#count", "value": "0"}]}


def _task(*probes: dict) -> dict:
    rubrics = [{"id": f"r{i}", "text": "x", "kind": "initial", "importance": "behavior",
                "probe": p} for i, p in enumerate(probes)]
    return {"t": parse_task({"id": "t", "prompt": "counter", "rubrics": rubrics})}


def _scored(responses: list[str], tasks: dict, cfg: EvalConfig) -> tuple[list[dict], int]:
    """(records, pages served) of `responses` to task "t", scored side by side in one browser."""
    async def run():
        worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
        try:
            recs = await score_rows_async([{"task_id": "t", "response": r} for r in responses],
                                          tasks, cfg, worker=worker)
            return recs, worker.pages_served
        finally:
            await worker.close()
    return asyncio.run(run())


def _score(tasks: dict, cfg: EvalConfig = CFG) -> tuple[dict, int]:
    """(record, pages served) for the correct counter app under `tasks`' task."""
    (rec,), pages = _scored([GOOD["response"]], tasks, cfg)
    return rec, pages


def test_timeouts_beside_other_pages_run_again_alone():
    rec, pages = _score(_task(SLOW, FAST, SLOW))
    # Three probes, then the first that timed out once more, alone; it times out alone too,
    # so the app is slow by itself and the other timeout stands without a rerun.
    assert pages == 4
    slow0, fast, slow2 = rec["rubrics"]
    assert fast["verdict"] == "pass" and "rerun" not in fast
    assert slow0["verdict"] == slow2["verdict"] == "fail"
    # The rerun decides no gate, so its limit is the plain probe limit; the first run's page
    # decided gate E, and its limit had the settling time on top.
    # Alone, the time its browser waited for a CPU (if any on this machine) is given back.
    assert slow0["message"].startswith("the probe timed out after 1500 ms"), slow0["message"]
    assert slow0["rerun"] == {
        "reason": "timed out while other pages or other work shared the CPU; run again alone",
        "first_message": "the probe timed out after 1800 ms",
        "first_duration_ms": slow0["rerun"]["first_duration_ms"]}
    assert slow0["rerun"]["first_duration_ms"] >= 1500
    assert "rerun" not in slow2 and slow2["message"] == "the probe timed out after 1500 ms"
    assert rec["status"] == "ok" and rec["gate"] is None
    schema = json.loads((EXAMPLES.parent / "schema" / "result.schema.json").read_text())
    problems = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(rec)]
    assert problems == []
    bad = json.loads(json.dumps(rec))
    bad["rubrics"][0]["rerun"]["why"] = "an undocumented field"
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)


def test_waiting_for_a_missing_element_until_the_limit_is_a_missing_element():
    # With no action timeout a click waits for its element until the probe's time limit;
    # when none matches, the element is missing, whatever the CPU did: no rerun.
    missing = {"steps": [{"do": "click", "locator": "#nope"}]}
    rec, pages = _score(_task(missing, FAST, missing))
    assert pages == 3
    first, fast, last = rec["rubrics"]
    assert fast["verdict"] == "pass"
    for v, limit in ((first, 1800), (last, 1500)):
        assert v["verdict"] == "fail" and v["severity"] == "severe" and "rerun" not in v
        assert v["message"] == (f"no element matches #nope: the probe timed out after {limit} "
                                "ms waiting for it"), v
        assert v["failed_step"] == 0


def test_a_timeout_alone_is_not_run_again(monkeypatch):
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", lambda: 0.0)  # nothing else wanted the CPU
    rec, pages = _score(_task(SLOW))
    assert pages == 1
    (v,) = rec["rubrics"]
    assert v["verdict"] == "fail" and "rerun" not in v
    assert v["message"] == "the probe timed out after 1800 ms"  # limit + gate's settling


def test_no_rerun_when_switched_off():
    cfg = dataclasses.replace(CFG, browser=dataclasses.replace(
        CFG.browser, rerun_contended_timeouts=False))
    rec, pages = _score(_task(SLOW, FAST, SLOW), cfg)
    assert pages == 3
    assert all("rerun" not in v for v in rec["rubrics"])


def test_a_page_alone_waits_for_the_open_pages_and_holds_back_new_ones():
    events: list[str] = []

    async def hold(worker, name, alone, started, release):
        async with worker.page("<p>x</p>", alone=alone) as (_, watch, _ctx):
            events.append(f"{name} open")
            started.set()
            await release.wait()
            events.append(f"{name} close shared={watch.shared}")

    async def run():
        worker = await BrowserWorker(CFG.browser, make_mirror(CFG)).start()
        try:
            ev = {k: (asyncio.Event(), asyncio.Event()) for k in ("a", "solo", "b")}
            ta = asyncio.ensure_future(hold(worker, "a", False, *ev["a"]))
            await ev["a"][0].wait()
            ts = asyncio.ensure_future(hold(worker, "solo", True, *ev["solo"]))
            await asyncio.sleep(0.3)
            assert not ev["solo"][0].is_set(), "a page alone opened beside an open page"
            # Opened after the page alone asked: it waits until that one is done.
            tb = asyncio.ensure_future(hold(worker, "b", False, *ev["b"]))
            await asyncio.sleep(0.3)
            ev["a"][1].set()
            await ev["solo"][0].wait()
            await asyncio.sleep(0.3)
            assert not ev["b"][0].is_set(), "a page opened beside a page alone"
            ev["solo"][1].set()
            await ev["b"][0].wait()
            ev["b"][1].set()
            await asyncio.gather(ta, ts, tb)
        finally:
            await worker.close()

    asyncio.run(run())
    assert events == ["a open", "a close shared=False", "solo open", "solo close shared=False",
                      "b open", "b close shared=False"]


def test_pages_open_together_are_marked_shared():
    async def run():
        worker = await BrowserWorker(CFG.browser, make_mirror(CFG)).start()
        try:
            async with worker.page("<p>1</p>") as (_, w1, _c1):
                assert not w1.shared
                async with worker.page("<p>2</p>") as (_, w2, _c2):
                    assert w1.shared and w2.shared
            async with worker.page("<p>3</p>") as (_, w3, _c3):
                pass
            return w3.shared
        finally:
            await worker.close()
    assert asyncio.run(run()) is False


# Answers nothing from just after load on: gate E fails as a hang wherever it runs.
HUNG = GOOD["response"].replace(
    "</body>", "<script>addEventListener('load', () => setTimeout(() => { for (;;) {} }, 0));"
    "</script></body>")
HANG_CFG = dataclasses.replace(CFG, browser=dataclasses.replace(
    CFG.browser, hang_timeout_ms=2000, probe_time_limit_ms=6000))


def _score_rows(responses: list[str], cfg: EvalConfig = HANG_CFG) -> tuple[list[dict], int]:
    return _scored(responses, _task(FAST), cfg)


def test_a_gate_timed_out_beside_other_pages_is_decided_again_alone():
    assert "</body>" in GOOD["response"]
    (hung, good), pages = _score_rows([HUNG, GOOD["response"]])
    assert good["gate"] is None and "runtime_rerun" not in good
    # Hung beside the other app's page, then hung alone too: the second decision stands.
    assert hung["gate"] == "runtime" and hung["reward"] == 0.1
    rerun = hung["runtime_rerun"]
    assert set(rerun) == {"reason", "first_message"}
    assert rerun["reason"] == ("timed out while other pages or other work shared the CPU; "
                               "decided again alone")
    # The gate's own answer check or the probe's watchdog, whichever asks first (on a
    # loaded machine the watchdog can): both read the same hang.
    first = rerun["first_message"]
    assert first.startswith("the page stopped answering after load (") and \
        "no reply in 2000 ms" in first, first
    assert hung["diagnostics"][0]["reason"] == "hang"
    assert pages == 3  # each app's probe page, then the hung app's gate page alone
    schema = json.loads((EXAMPLES.parent / "schema" / "result.schema.json").read_text())
    assert jsonschema.Draft202012Validator(schema).is_valid(hung)
    bad = {**hung, "runtime_rerun": {**hung["runtime_rerun"], "why": "undocumented"}}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)


def test_a_gate_timed_out_alone_is_not_decided_again(monkeypatch):
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", lambda: 0.0)  # nothing else wanted the CPU
    (hung,), pages = _score_rows([HUNG])
    assert hung["gate"] == "runtime" and "runtime_rerun" not in hung and pages == 1


def test_a_gate_timed_out_alone_while_the_cpu_was_contended_is_decided_again(monkeypatch):
    import time
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", time.monotonic)  # waits all along
    (hung,), pages = _score_rows([HUNG])
    assert hung["gate"] == "runtime" and pages == 2
    assert hung["runtime_rerun"]["first_message"].startswith("the page stopped answering")


def test_a_gate_decided_alone_gives_back_the_time_its_browser_waited_for_a_cpu(monkeypatch):
    # Starved (so decided again alone), and alone its browser waits for a CPU ten times as
    # fast as the wall clock runs: the 2 s answer limit grows by one more limit, to 4 s. The
    # hung app never answers, so each wait for an answer lasts exactly its limit.
    import time
    import evaluators.checks.runtime_gate as runtime_gate
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", time.monotonic)
    monkeypatch.setattr(processes, "cpu_waits", lambda pid: {pid: time.monotonic() * 10})
    took, real = [], runtime_gate.answers

    async def timed(*a, **kw):
        t0 = time.monotonic()
        try:
            return await real(*a, **kw)
        finally:
            took.append((time.monotonic() - t0, a[4] if len(a) > 4 else kw.get("waits")))

    monkeypatch.setattr(runtime_gate, "answers", timed)
    (hung,), pages = _score_rows([HUNG])
    assert hung["gate"] == "runtime" and "runtime_rerun" in hung and pages == 2
    (first, none), (alone, reader) = took
    assert none is None and reader is not None
    assert 1.9 < first < 3.5 and alone >= 3.9, took


def test_no_gate_rerun_when_switched_off():
    cfg = dataclasses.replace(HANG_CFG, browser=dataclasses.replace(
        HANG_CFG.browser, rerun_contended_timeouts=False))
    (hung, _), pages = _score_rows([HUNG, GOOD["response"]], cfg)
    assert hung["gate"] == "runtime" and "runtime_rerun" not in hung and pages == 2


def test_a_gate_that_passes_alone_stands_and_the_first_probe_runs_afresh(monkeypatch):
    # Starvation cannot be staged deterministically, so the decision alone is made on the
    # calm app (as a starved page would have been, given the CPU): the gate passes, and the
    # probe that was stopped at the failed gate runs again on a page of its own.
    from evaluators.checks import score

    real = score.check_runtime

    async def calm_when_alone(worker, extraction, cfg, frames, alone=False):
        if alone:
            extraction = dataclasses.replace(extraction, code=score.extract_app(
                GOOD["response"]).code)
        return await real(worker, extraction, cfg, frames, alone)

    monkeypatch.setattr(score, "check_runtime", calm_when_alone)
    (hung, good), pages = _score_rows([HUNG, GOOD["response"]])
    assert hung["gate"] is None and hung["runtime_rerun"]["first_message"].startswith(
        "the page stopped answering")
    (verdict,) = hung["rubrics"]
    assert verdict["verdict"] == "fail"  # the probe itself meets the real, hung app
    # Two probe pages, the gate alone, the first probe afresh; and once more alone if that
    # page's hang came beside another page or on a contended CPU (as a time-out would).
    again = "rerun" in verdict
    assert not again or verdict["rerun"]["reason"].startswith("stopped answering while")
    assert pages == 4 + again


# Loops from its first script on: `load` never fires.
LOOPS_AT_LOAD = GOOD["response"].replace("<body>", "<body><script>for (;;) {}</script>", 1)
BUSY_CFG = dataclasses.replace(CFG, browser=dataclasses.replace(
    CFG.browser, load_timeout_ms=20_000, hang_timeout_ms=20_000, probe_time_limit_ms=30_000,
    busy_limit_ms=1500))


@pytest.mark.parametrize("app, message", [
    (HUNG, "the page stopped answering after load (its script kept the main thread busy"),
    (LOOPS_AT_LOAD, "the page did not load (its script kept the main thread busy")],
    ids=["hangs after load", "loops at load"])
def test_a_page_busy_with_its_own_loop_fails_at_the_cpu_limit_and_is_not_decided_again(
        app, message):
    assert app != GOOD["response"]
    (busy, good), pages = _scored([app, GOOD["response"]], _task(FAST), BUSY_CFG)
    assert good["gate"] is None and good["reward"] == 1.0
    # Beside another page, but its own main thread spent the CPU: no rerun alone, and it is
    # decided at the CPU limit (1.5 s of CPU, read every 0.5 s), long before the 20 s ones.
    assert busy["gate"] == "runtime" and busy["reward"] == 0.1
    assert "runtime_rerun" not in busy and pages == 2
    first = busy["diagnostics"][0]
    assert first["kind"] == "runtime_failure" and first["message"].startswith(message), first
    assert busy["timings"]["runtime_ms"] < 15_000, busy["timings"]


def test_without_a_cpu_limit_the_same_loop_is_decided_again_alone():
    cfg = dataclasses.replace(BUSY_CFG, browser=dataclasses.replace(
        BUSY_CFG.browser, busy_limit_ms=None, hang_timeout_ms=2000))
    (busy, _good), pages = _scored([HUNG, GOOD["response"]], _task(FAST), cfg)
    assert busy["gate"] == "runtime" and "runtime_rerun" in busy and pages == 3


def test_a_timeout_while_the_machine_was_starved_runs_again_alone(monkeypatch):
    # The only page of its browser, but tasks on the machine waited for a CPU all along (a
    # stall clock that runs with the wall clock): the timeout may be the machine's doing,
    # so it is run again alone, as a timeout beside other pages is.
    import time
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", time.monotonic)
    rec, pages = _score(_task(SLOW))
    assert pages == 2
    (v,) = rec["rubrics"]
    assert v["verdict"] == "fail" and v["rerun"]["first_message"] == \
        "the probe timed out after 1800 ms", v


def test_alone_the_time_its_browser_waited_for_a_cpu_is_given_back(monkeypatch):
    # The rerun alone: its renderer waits for a CPU half the time (a run-delay clock at half
    # the wall clock's rate). The 1.5 s limit grows by that, up to one more limit (3 s), so
    # the 2.5 s wait ends within it and the probe passes; without the waits it times out.
    import time
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", time.monotonic)
    monkeypatch.setattr(processes, "cpu_waits", lambda pid: {pid: time.monotonic() / 2})
    rec, _ = _score(_task(SLOW))
    (v,) = rec["rubrics"]
    assert v["verdict"] == "pass" and "rerun" in v, v
    # Starved without end: the limit grows by one limit at most, then the probe times out.
    monkeypatch.setattr(processes, "cpu_waits", lambda pid: {pid: time.monotonic() * 10})
    slower = {"steps": [{"wait_ms": 4000}, {"expect": "text", "locator": "#count", "value": "0"}]}
    rec, _ = _score(_task(slower))
    (v,) = rec["rubrics"]
    assert v["verdict"] == "fail" and v["message"].startswith(
        "the probe timed out after 1500 ms and 1500 ms more its browser waited for a CPU"), v


# Shown at 1.5 s: past the first deadline (1 s), within the one moved 1 s later at 0.9 s.
LATE_BUTTON = ("<button id=b style='display:none'>b</button>"
               "<script>setTimeout(() => { b.style.display = ''; }, 1500)</script>")


def _run_with_time_given_back(steps: list[dict]) -> Exception | None:
    """Runs `steps` on LATE_BUTTON with a 1 s deadline that moves 1 s later at 0.9 s, as
    `probe_run._within` moves it alone; the step's exception, or None when it passed."""
    from evaluators.checks.probes import ProbeRunner
    from evaluators.sandbox.browser import monotonic_ms

    async def run():
        worker = await BrowserWorker(CFG.browser, make_mirror(CFG)).start()
        try:
            async with worker.page(LATE_BUTTON) as (page, watch, _):
                runner = ProbeRunner(page, watch, {"steps": steps}, None, monotonic_ms() + 5000)
                await runner.load(5000)
                runner.deadline = monotonic_ms() + 1000
                asyncio.get_running_loop().call_later(0.9, runner.extend, 1000)
                try:
                    await runner.run()
                except Exception as e:  # noqa: BLE001 - the test reads it
                    return e
                return None
        finally:
            await worker.close()
    return asyncio.run(run())


@pytest.mark.parametrize("steps", [
    [{"do": "click", "locator": "#b"}],
    [{"retry": [{"expect": "visible", "locator": "#b"}], "timeout_ms": 5000}],
], ids=["action", "retry-block"])
def test_a_wait_bounded_by_a_deadline_that_moved_goes_on_in_the_time_given_back(steps):
    # Alone, the probe's deadline moves while a step waits with the old one as its timeout.
    # That timeout is the probe's, not the step's failure: the step goes on until the new
    # deadline. Before, whichever came first decided: the step's timeout a `moderate`
    # failure, the probe's limit a `severe` timeout (the same app scored 0.42 and 0.62).
    assert _run_with_time_given_back(steps) is None


# The page answers nothing from 0.5 s after its script runs until 6.5 s: an expectation
# bounded at 1 s fails in that stretch, and the question that tells a wrong value from a
# missing element waits for the page.
SLOW_TO_ANSWER = ("<p id=out>a</p><script>setTimeout(() => { const t = Date.now(); "
                  "while (Date.now() - t < 6000); }, 500)</script>")


def test_a_wrong_value_on_a_page_slow_to_answer_is_a_wrong_value_not_a_hang():
    # Before, the element count behind the kind of failure had 2 s: a heavy page on a busy
    # machine made the same wrong value a `severe` hang or a `moderate` wrong value by the
    # load (one app scored 0.45 and 0.55). A page is hung only by the watchdog's measure.
    from evaluators.checks.probes import ProbeRunner, StepFailure
    from evaluators.contract import Reason
    from evaluators.sandbox.browser import monotonic_ms

    async def run():
        worker = await BrowserWorker(CFG.browser, make_mirror(CFG)).start()
        try:
            async with worker.page(SLOW_TO_ANSWER) as (page, watch, _):
                runner = ProbeRunner(
                    page, watch, {"steps": [{"expect": "text", "locator": "#out", "value": "b"}],
                                  "timeout_ms": 1000},
                    None, monotonic_ms() + 30_000, hang_timeout_ms=CFG.browser.hang_timeout_ms)
                await runner.load(5000)
                t0 = time.monotonic()
                try:
                    await runner.run()
                except StepFailure as e:
                    return e, time.monotonic() - t0
                return None, time.monotonic() - t0
        finally:
            await worker.close()
    failure, took = asyncio.run(run())
    assert failure is not None and failure.reason is Reason.WRONG_VALUE, (failure, took)
    assert failure.severity == "moderate"
    # The count did wait past the old 2 s for the page (else this test shows nothing), and
    # within the watchdog's 8 s here.
    assert took > 2.5, took


# A click starts 5 s of computing, then writes the answer: the watchdog (3 s here) finds the
# page not answering unless it is given back the time the page waited for a CPU.
COMPUTES = ("```html\n<!DOCTYPE html><html><body><button id=go>go</button><p id=out>-</p>"
            "<script>go.onclick = () => { const t = Date.now(); while (Date.now() - t < 5000); "
            "out.textContent = 'done'; };</script></body></html>\n```")
COMPUTES_TASK = {"t": parse_task({"id": "t", "prompt": "compute", "rubrics": [
    {"id": "r0", "text": "x", "kind": "dynamic", "importance": "behavior",
     "probe": {"steps": [{"do": "click", "locator": "#go"},
                         {"expect": "text", "locator": "#out", "value": "done"}],
               "timeout_ms": 9000}}]})}


def test_a_page_that_stopped_answering_on_a_starved_machine_is_decided_again_alone(monkeypatch):
    # The machine's tasks waited for a CPU all along (a stall clock that runs with the wall
    # clock), and alone the page's renderer waits for a CPU all the time (a run-delay clock
    # at the wall clock's rate): the watchdog's 3 s is then the machine's doing. Alone it
    # grows by those waits, up to one more 3 s, and the 5 s computation ends within it.
    # Before, a watchdog hang stood as the app's failure however loaded the machine was.
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", time.monotonic)
    monkeypatch.setattr(processes, "cpu_waits", lambda pid: {pid: time.monotonic()})
    cfg = dataclasses.replace(CFG, browser=dataclasses.replace(
        CFG.browser, hang_timeout_ms=3000, probe_time_limit_ms=15_000))
    (rec,), pages = _scored([COMPUTES], COMPUTES_TASK, cfg)
    (v,) = rec["rubrics"]
    assert v["verdict"] == "pass", (v, rec["gate"], [d["message"] for d in rec["diagnostics"]])
    assert v["rerun"]["reason"].startswith("stopped answering while"), v["rerun"]
    assert v["rerun"]["first_message"].startswith("the page stopped answering"), v["rerun"]
    assert pages == 2


def test_a_loop_in_a_handler_is_decided_by_its_cpu_and_not_again_alone(monkeypatch):
    # A real infinite loop spends the CPU it gets: at the CPU limit (2 s here) it hung by
    # itself, however loaded the machine (the stall clock says always), so it is not run
    # again alone and is decided long before the wall-clock watchdog (20 s here).
    import evaluators.sandbox.processes as processes
    monkeypatch.setattr(processes, "cpu_stall_s", time.monotonic)
    loops = COMPUTES.replace("while (Date.now() - t < 5000);", "for (;;) {}")
    cfg = dataclasses.replace(CFG, browser=dataclasses.replace(
        CFG.browser, hang_timeout_ms=20_000, busy_limit_ms=2000, probe_time_limit_ms=30_000))
    t0 = time.monotonic()
    (rec,), pages = _scored([loops], COMPUTES_TASK, cfg)
    took = time.monotonic() - t0
    (v,) = rec["rubrics"]
    assert v["verdict"] == "fail" and "rerun" not in v and pages == 1, v
    assert v["message"].startswith("the page stopped answering (its script kept the main "
                                   "thread busy"), v["message"]
    assert took < 15, took
