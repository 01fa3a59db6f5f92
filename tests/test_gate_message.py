"""What gate E says when a probe page ended before the gate was decided
(`score._decide_unloaded`), without a browser: each cause said once, with when it came."""

from __future__ import annotations

import asyncio
import types

import pytest

from evaluators.checks import score
from evaluators.checks.extract import extract_app
from evaluators.checks.probes import StepFailure
from evaluators.checks.runtime_gate import RuntimeGate
from evaluators.config import EvalConfig
from evaluators.sandbox.browser import PageWatch

APP = "```html\n<!DOCTYPE html><html><body><p>hi</p></body></html>\n```"


def _gate_message(failure: str, loaded: bool, busy: bool = False) -> str:
    async def run() -> str:
        frames = score.Frames(extract_app(APP))
        gate = RuntimeGate(EvalConfig(), frames)
        runner = types.SimpleNamespace(loaded=loaded, watch=PageWatch(busy=busy))
        score._decide_unloaded(gate, runner, StepFailure(failure, "severe"), 10_000)
        passed, diags = gate.result.result()
        assert not passed and diags[0]["kind"] == "runtime_failure"
        return diags[0]["message"]
    return asyncio.run(run())


@pytest.mark.parametrize("failure, want", [
    # The probe's watchdog fired before the gate's own check after load (a race on a busy
    # machine): before, the record said "stopped answering after load (the page stopped
    # answering (...))".
    ("the page stopped answering (its script kept the main thread busy for 1.5 s of CPU time)",
     "the page stopped answering after load (its script kept the main thread busy for 1.5 s "
     "of CPU time)"),
    ("the page stopped answering (no reply in 5000 ms): an infinite loop?",
     "the page stopped answering after load (no reply in 5000 ms): an infinite loop?"),
    ("probe step 3 ran out of time", "the page stopped answering after load (probe step 3 ran "
     "out of time)")])
def test_a_page_that_stopped_answering_after_load_says_so_once(failure, want):
    assert _gate_message(failure, loaded=True) == want


def test_a_page_that_did_not_load_says_within_what_time():
    got = _gate_message("the page did not load: timeout", loaded=False)
    assert got == "the page did not load within 10000 ms (timeout)"
    got = _gate_message("navigation failed", loaded=False)
    assert got == "the page did not load (navigation failed)"
