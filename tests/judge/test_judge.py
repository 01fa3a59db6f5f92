"""The judge against a scripted OpenAI-compatible server on loopback (evaluators.judge.fake):
each path of the protocol (retries, timeouts, bad answers, repair, cache), the verdicts and
findings merged into a record that still validates, and the reward redone."""

from __future__ import annotations

import asyncio
import json

import pytest

from evaluators.config import RewardConfig
from evaluators.contract import read_record
from evaluators.judge.client import ChatClient, JudgeUnavailable
from evaluators.judge.config import JudgeConfig
from evaluators.judge.fake import FakeJudgeServer, Reply, asked_ids
from evaluators.judge.judge import Judge, judge_record
from evaluators.records import validate_record
from evaluators.tasks import Rubric, Task

APP = """<button id="go">go</button><p id="out">0</p>
<script>
let n = 0;
document.getElementById('go').addEventListener('click', () => { n -= 1; });
</script>"""
RESPONSE = f"Here is the app:\n```html\n{APP}\n```\n"
TASK = Task(id="t1", prompt="A counter: the button adds one to the number shown.", rubrics=(
    Rubric("probed", "The number is shown", "initial", "core", {"steps": [
        {"expect": "visible", "locator": "#out"}]}),
    Rubric("adds", "Clicking the button adds one", "dynamic", "core", None),
    Rubric("looks", "The layout is tidy", "initial", "rendering", None)))


def _record() -> dict:
    """A record as the browser step leaves it: the probe passed, two rubrics unjudged."""
    start = RESPONSE.index("<button")
    return {"task_id": "t1", "response": RESPONSE, "reward": 1.0, "gate": None, "status": "ok",
            "rubrics": [
                {"id": "probed", "verdict": "pass", "importance": "core", "kind": "initial",
                 "severity": None, "failed_step": None, "message": None, "duration_ms": 5.0,
                 "runtime_error": False},
                *({"id": i, "verdict": "unjudged", "importance": imp, "kind": k,
                   "severity": None, "failed_step": None,
                   "message": "no probe: a judge must score this rubric"}
                  for i, imp, k in (("adds", "core", "dynamic"), ("looks", "rendering",
                                                                   "initial")))],
            "rubric_counts": {"pass": 1, "fail": 0, "error": 0, "unjudged": 2},
            "diagnostics": [], "attempts": 1, "timings": {"format_ms": 0.1, "total_ms": 9.0},
            "extraction": {"start": start, "end": start + len(APP), "method": "fenced"},
            "schema_version": 2}


def _answer(**verdicts) -> str:
    rubrics = []
    for rid, (verdict, severity) in verdicts.items():
        issues = [] if verdict == "pass" else [{
            "issue": "the button subtracts one", "code": "n -= 1;", "line": 4,
            "selector": "#go", "handler": None, "state": "n"}]
        rubrics.append({"id": rid, "verdict": verdict, "severity": severity, "issues": issues})
    return json.dumps({"rubrics": rubrics})


GOOD = _answer(adds=("fail", "critical"), looks=("pass", None))


def _judge(server: FakeJudgeServer, **kw) -> Judge:
    return Judge(JudgeConfig(base_url=server.base_url, model="fake-judge", backoff_s=0.01,
                             max_backoff_s=0.05, **kw))


def _run(judge: Judge, record: dict | None = None) -> dict:
    async def go():
        try:
            return await judge_record(judge, TASK, RESPONSE, record or _record(), RewardConfig())
        finally:
            await judge.close()
    return asyncio.run(go())


def test_verdicts_findings_and_reward_from_the_judge():
    with FakeJudgeServer([Reply(GOOD)]) as server:
        rec = _run(_judge(server))
        (body,) = server.requests
    assert asked_ids(body) == ["adds", "looks"]  # never the probed rubric, by default
    assert body["response_format"]["type"] == "json_schema" and body["model"] == "fake-judge"
    assert "3| let n = 0;" in body["messages"][1]["content"]  # the source, numbered
    adds, looks = rec["rubrics"][1], rec["rubrics"][2]
    assert (adds["verdict"], adds["severity"], adds["decided_by"]) == ("fail", "severe", "judge")
    assert (looks["verdict"], looks["message"]) == ("pass", None)
    assert rec["rubrics"][0].get("decided_by") is None  # the probe's, untouched
    # A core rubric failed at the judge's critical severity: 1 - 0.5, under the 0.4 ceiling.
    assert rec["reward"] == pytest.approx(0.4)
    (finding,) = [d for d in rec["diagnostics"] if d["kind"] == "judge_finding"]
    assert (finding["evidence_code"], finding["evidence_line"], finding["state_var"],
            finding["judge_severity"], finding["rubric_id"]) == ("n -= 1;", 4, "n", "critical",
                                                                  "adds")
    assert rec["judge"]["usage"]["requests"] == 1 and rec["judge"]["usage"]["prompt_tokens"] > 0
    assert rec["rubric_counts"] == {"pass": 2, "fail": 1, "error": 0, "unjudged": 0}
    validate_record(rec)
    read_record(rec)


def test_a_malformed_answer_gets_one_repair_then_the_rubrics_are_errors():
    with FakeJudgeServer([Reply("not json {"), Reply(GOOD)]) as server:
        rec = _run(_judge(server))
        assert len(server.requests) == 2
        repair = server.requests[1]["messages"]
    assert repair[-2]["role"] == "assistant" and "not JSON" in repair[-1]["content"]
    assert rec["rubrics"][1]["verdict"] == "fail" and "error" not in rec["judge"]

    wrong = json.dumps({"rubrics": [{"id": "adds", "verdict": "maybe", "severity": None,
                                     "issues": []}]})
    with FakeJudgeServer([Reply(wrong), Reply(wrong)]) as server:
        rec = _run(_judge(server))
    for r in rec["rubrics"][1:]:
        assert (r["verdict"], r["error_source"]) == ("error", "judge")
    assert "unusable after repair" in rec["judge"]["error"] and "verdict" in rec["judge"]["error"]
    assert rec["reward"] == 1.0 and rec["status"] == "ok"  # errors cost nothing
    validate_record(rec)


def test_an_answer_about_other_rubrics_is_not_accepted():
    unknown = _answer(adds=("pass", None), looks=("pass", None), probed=("pass", None))
    missing = _answer(adds=("pass", None))
    with FakeJudgeServer([Reply(unknown), Reply(missing)]) as server:
        rec = _run(_judge(server))
    assert "no verdict for rubric(s) ['looks']" in rec["judge"]["error"]


def test_rate_limits_and_server_errors_are_retried_with_backoff():
    with FakeJudgeServer([Reply(status=429, headers=(("Retry-After", "0"),)),
                          Reply(status=503), Reply(GOOD)]) as server:
        rec = _run(_judge(server))
    assert rec["judge"]["usage"]["attempts"] == 3 and rec["rubrics"][1]["verdict"] == "fail"


@pytest.mark.parametrize("replies, kw, said, requests", [
    ([Reply(status=500)] * 3, {"retries": 2}, "no answer after 3 attempts: HTTP 500", 3),
    ([Reply(status=400)], {"retries": 5}, "HTTP 400", 1),  # final at once
    ([Reply(GOOD, delay_s=1.5)], {"retries": 0, "timeout_s": 0.3}, "timed out after 0.3 s", 1),
    ([Reply(raw="<html>busy</html>")], {}, "not JSON", 1),
])
def test_an_unavailable_judge_is_an_evaluator_failure(replies, kw, said, requests):
    with FakeJudgeServer(replies) as server:
        with pytest.raises(JudgeUnavailable, match=said):
            _run(_judge(server, **kw))
        assert len(server.requests) == requests


def test_the_pool_marks_the_record_an_evaluator_error_when_the_judge_is_out():
    from evaluators.fleet.pool import judged

    with FakeJudgeServer([Reply(status=500)] * 2) as server:
        cfg = JudgeConfig(base_url=server.base_url, model="m", retries=1, backoff_s=0.01)
        judge = Judge(cfg)
        from evaluators.config import EvalConfig
        rec = asyncio.run(judged(judge, TASK, {"task_id": "t1", "response": RESPONSE},
                                 _record(), EvalConfig(judge=cfg)))
    assert rec["status"] == "error" and rec["reward"] is None
    assert "judge unavailable" in rec["error"]
    validate_record(rec)


def test_identical_responses_are_judged_once_with_a_cache(tmp_path):
    with FakeJudgeServer([Reply(GOOD)]) as server:
        first = _run(_judge(server, cache_dir=str(tmp_path)))
        again = _run(_judge(server, cache_dir=str(tmp_path)))
        assert len(server.requests) == 1
    assert again["judge"]["cached"] and again["judge"]["usage"]["requests"] == 0
    assert again["rubrics"] == first["rubrics"]
    other = _judge(FakeJudgeServer(), cache_dir=str(tmp_path), prompt_version="v1")
    assert other.cache.get("0" * 64) is None


def test_the_schema_can_travel_in_the_prompt_for_servers_without_structured_output():
    with FakeJudgeServer([Reply("```json\n" + GOOD + "\n```")]) as server:
        rec = _run(_judge(server, structured="prompt"))
        (body,) = server.requests
    assert "response_format" not in body and '"rubrics"' in body["messages"][1]["content"]
    assert rec["rubrics"][1]["verdict"] == "fail"  # a fenced answer is read too


def test_both_keeps_the_probes_verdict_and_says_whether_the_judge_agreed():
    answer = _answer(probed=("fail", "major"), adds=("pass", None), looks=("pass", None))
    with FakeJudgeServer([Reply(answer), Reply(answer)]) as server:
        rec = _run(_judge(server, probed="both"))
        judged = _run(_judge(server, probed="both", prefer="judge"))
    probed = rec["rubrics"][0]
    assert (probed["verdict"], probed["decided_by"]) == ("pass", "probe")
    assert probed["judge"] == {"verdict": "fail", "severity": "moderate", "issues": 1,
                               "agree": False}
    assert (judged["rubrics"][0]["verdict"], judged["rubrics"][0]["decided_by"]) == (
        "fail", "judge")
    assert judged["reward"] < rec["reward"]
    validate_record(rec)
    validate_record(judged)


def test_the_api_key_comes_from_the_named_environment_variable(monkeypatch):
    seen = []
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test")
    with FakeJudgeServer([Reply(GOOD)]) as server:
        import httpx

        async def go():
            real = httpx.AsyncHTTPTransport()

            class Capture(httpx.AsyncBaseTransport):
                async def handle_async_request(self, request):
                    seen.append(request.headers.get("authorization"))
                    return await real.handle_async_request(request)

            client = ChatClient(JudgeConfig(base_url=server.base_url, model="m",
                                            api_key_env="MY_JUDGE_KEY"), Capture())
            await client.complete([{"role": "user", "content": "hi"}])
            await client.close()
        asyncio.run(go())
    assert seen == ["Bearer sk-test"]


def test_bad_judge_settings_are_named():
    with pytest.raises(ValueError, match="JudgeConfig.model: missing"):
        JudgeConfig(base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="JudgeConfig.probed='all'"):
        JudgeConfig(probed="all")
    with pytest.raises(ValueError, match="no prompt file"):
        with FakeJudgeServer() as server:
            _run(_judge(server, prompt_version="v0"))
