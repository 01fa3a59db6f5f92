"""The agentic judge drives a real page through its tools (real Chromium, the scripted
server on loopback): what the tools return is what the app does, the trajectory is kept, and
a judge that never stops calling tools is cut off."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from evaluators.config import EvalConfig
from evaluators.fleet.pool import score_rows_async
from evaluators.judge.config import JudgeConfig
from evaluators.judge.fake import FakeJudgeServer, Reply
from evaluators.records import validate_record
from evaluators.tasks import Rubric, Task

APP = """```html
<button id="inc">+</button><span id="out">0</span><input id="name">
<script>
let n = 0;
document.getElementById('inc').addEventListener('click', () => {
  n += 2;
  document.getElementById('out').textContent = n;
});
</script>
```"""
TASK = Task(id="c", prompt="A counter that adds one per click.", rubrics=(
    Rubric("adds", "Each click on + adds one to the number", "dynamic", "core", None),))


def _call(k: int, tool: str, **args) -> dict:
    return {"id": f"call_{k}", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args)}}


def _score(server: FakeJudgeServer, **kw) -> dict:
    cfg = EvalConfig(judge=JudgeConfig(base_url=server.base_url, model="agent", agentic=True,
                                       backoff_s=0.01, **kw))
    # A missing element fails its tool call after 1 s, not the default 5 s.
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(cfg.browser,
                                                               action_timeout_ms=1000))
    (rec,) = asyncio.run(score_rows_async([{"task_id": "c", "response": APP}], {"c": TASK}, cfg))
    return rec


@pytest.mark.browser
def test_the_judge_clicks_reads_and_answers_from_what_the_app_did():
    verdict = json.dumps({"rubrics": [{"id": "adds", "verdict": "fail", "severity": "major",
                                       "issues": [{"issue": "one click shows 2", "code": "n += 2;",
                                                   "line": 5}]}]})
    with FakeJudgeServer([
            Reply(tool_calls=(_call(1, "click", selector="#inc"),)),
            Reply(tool_calls=(_call(2, "read_text", selector="#out"),
                              _call(3, "read_attribute", selector="#name", name="value"),
                              _call(4, "click", selector="#missing"))),
            Reply(verdict)]) as server:
        rec = _score(server, agent_steps=8)
        bodies = server.requests
    assert "tools" in bodies[0] and bodies[0]["tools"][0]["function"]["name"] == "click"
    tool_msgs = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_1", "call_2", "call_3", "call_4"]
    trajectory = rec["judge"]["trajectory"]
    assert [(t["tool"], t["result"]) for t in trajectory[:3]] == [
        ("click", "ok"), ("read_text", '"2"'), ("read_attribute", '""')]
    assert trajectory[3]["result"].startswith("error: TimeoutError")  # no such element
    (adds,) = rec["rubrics"]
    assert (adds["verdict"], adds["decided_by"], adds["severity"]) == ("fail", "judge",
                                                                       "moderate")
    (finding,) = [d for d in rec["diagnostics"] if d["kind"] == "judge_finding"]
    assert finding["evidence_code"] == "n += 2;"
    validate_record(rec)


@pytest.mark.browser
def test_a_judge_that_keeps_calling_tools_is_cut_off():
    loop = lambda body: Reply(tool_calls=(_call(len(body["messages"]), "list_interactive"),))  # noqa: E731
    with FakeJudgeServer(default=loop) as server:
        rec = _score(server, agent_steps=3)
        n = len(server.requests)
        last = server.requests[-1]
    assert n == 4 and "tools" not in last  # 3 tool rounds, then asked to answer without tools
    assert rec["status"] == "ok" and rec["rubrics"][0]["verdict"] == "error"
    assert "kept calling tools" in rec["judge"]["error"]
    assert len(rec["judge"]["trajectory"]) == 3
    assert json.loads(rec["judge"]["trajectory"][0]["result"])[0]["id"] == "inc"
    validate_record(rec)
