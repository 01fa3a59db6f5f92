"""The judge's step of scoring: rubric verdicts and judge findings from an LLM.

``judge_record`` runs after the browser is done with a response (it never holds a page
while waiting for the model). It asks the judge about the rubrics the config gives it
(those without a probe; with ``probed=both`` also those with one), in one request per
response. The answer must follow ``verdicts.SCHEMA``; an answer that does not gets one
repair request, and if that fails too the rubrics asked about get verdict ``error`` (the
evaluator's failure: they cost nothing). A judge that does not answer at all after its
retries raises ``JudgeUnavailable`` and the caller marks the record ``status: error``.

Per rubric the record then says who decided it (``decided_by``: probe or judge) and keeps
the judge's verdict beside the probe's (``judge``: verdict, severity, agree); the judge's
severity feeds the penalty of the rubrics it decides. Each issue of a failed rubric becomes
a ``judge_finding`` diagnostic with its quoted code, line, selector, handler and state
variable, which localization matches to the response.
"""

from __future__ import annotations

import dataclasses

from evaluators.checks.reward import gated_reward
from evaluators.config import BrowserConfig, RewardConfig
from evaluators.contract import Diagnostic, Reason
from evaluators.judge import prompt
from evaluators.judge.cache import JudgeCache, key
from evaluators.judge.agent import PageTools, converse
from evaluators.judge.client import ChatClient, Completion, Usage
from evaluators.judge.config import JudgeConfig
from evaluators.judge.verdicts import BadAnswer, Issue, Judgement, parse, response_format
from evaluators.tasks import Task



@dataclasses.dataclass
class Outcome:
    """One response's judging: the judgements (None after a failed repair), why not, the
    usage, whether it came from the cache, and the tool calls of an agentic judge."""

    judgements: dict[str, Judgement] | None
    error: str | None
    usage: Usage
    cached: bool = False
    trajectory: list[dict] | None = None
    answer: str = ""  # the text the judgements were parsed from (what the cache keeps)


class Judge:
    """The judge of one evaluator worker: its client, its cache, its config."""

    def __init__(self, cfg: JudgeConfig, transport=None):
        self.cfg = cfg
        self.client = ChatClient(cfg, transport)
        self.cache = JudgeCache(cfg.cache_dir) if cfg.cache_dir else None

    async def close(self) -> None:
        await self.client.close()

    async def ask(self, task: Task, rubric_ids: list[str], response: str, app_source: str,
                  record: dict, worker=None, browser: BrowserConfig | None = None) -> Outcome:
        """Verdicts on ``rubric_ids``: cached, or asked (browsing first when the config is
        agentic and a ``worker`` is given), with at most one repair of the answer."""
        k = key(self.cfg, task.id, rubric_ids, response)
        hit = self.cache.get(k) if self.cache else None
        if hit is not None:
            return Outcome(parse(hit["answer"], rubric_ids), None, Usage(cached=1), True,
                           hit.get("trajectory"))
        rubrics = [r for r in task.rubrics if r.id in rubric_ids]
        messages = prompt.messages(self.cfg, task, rubrics, app_source, record)
        fmt = response_format() if self.cfg.structured == "json_schema" else None
        usage, trajectory = Usage(), None
        if self.cfg.agentic and worker is not None:
            messages[-1]["content"] += prompt.agent_note(self.cfg)
            first, trajectory = await self._browse(worker, browser or BrowserConfig(),
                                                   app_source, messages, fmt, usage)
            if first is None:
                return Outcome(None, "the judge kept calling tools past its budget "
                               f"({self.cfg.agent_steps} calls, {self.cfg.agent_time_s:g} s)",
                               usage, trajectory=trajectory)
        else:
            first = await self.client.complete(messages, response_format=fmt)
            usage.add(first.usage)
        out = await self._parse_or_repair(first, messages, rubric_ids, fmt, usage)
        out.trajectory = trajectory
        if out.judgements is not None and self.cache:
            self.cache.put(k, {"answer": out.answer, "trajectory": trajectory})
        return out

    async def _parse_or_repair(self, done: Completion, messages: list[dict],
                               rubric_ids: list[str], fmt: dict | None, usage: Usage) -> Outcome:
        try:
            return Outcome(parse(done.content, rubric_ids), None, usage, answer=done.content)
        except BadAnswer as e:
            messages = [*messages, {"role": "assistant", "content": done.content},
                        prompt.repair(self.cfg, str(e), rubric_ids)]
        again = await self.client.complete(messages, response_format=fmt)
        usage.add(again.usage)
        try:
            return Outcome(parse(again.content, rubric_ids), None, usage, answer=again.content)
        except BadAnswer as e:
            return Outcome(None, f"judge answer unusable after repair: {e}", usage)

    async def _browse(self, worker, browser: BrowserConfig, app_source: str,
                      messages: list[dict], fmt: dict | None, usage: Usage):
        """The agentic conversation on a sandboxed page of ``worker`` (``agent.converse``)."""
        from evaluators.sandbox.loading import load_app

        async with worker.page(app_source) as (page, watch, _):
            try:
                await load_app(page, watch, browser.load_timeout_ms, browser.busy_limit_ms)
            except Exception as e:  # noqa: BLE001 - what the judge should know, not a fault
                messages[-1]["content"] += f"\n\n(The app did not load: {str(e)[:200]})"
            tools = PageTools(page, watch, browser.action_timeout_ms or 5000, self.cfg.images)
            final, done = await converse(self.client, messages, tools, self.cfg.agent_steps,
                                         self.cfg.agent_time_s, fmt)
        for c in done:
            usage.add(c.usage)
        return final, tools.trajectory


def to_judge(cfg: JudgeConfig, task: Task, record: dict) -> list[str]:
    """The ids of the rubrics the judge is asked about for this record."""
    if record.get("extraction") is None:  # no app: nothing to read
        return []
    verdicts = {r["id"]: r["verdict"] for r in record.get("rubrics") or ()}
    return [r.id for r in task.rubrics if r.probe is None or (
        cfg.probed == "both" and verdicts.get(r.id) in ("pass", "fail"))]


async def judge_record(judge: Judge, task: Task, response: str, record: dict,
                       reward: RewardConfig, worker=None,
                       browser: BrowserConfig | None = None) -> dict:
    """The record with the judge's verdicts and findings merged in, and its reward redone.

    Raises:
      JudgeUnavailable: the judge did not answer (the caller records an evaluator error).
    """
    ids = to_judge(judge.cfg, task, record)
    if not ids or record.get("status") != "ok":
        return record
    ext = record["extraction"]
    out = await judge.ask(task, ids, response, response[ext["start"]:ext["end"]], record,
                          worker, browser)
    rubrics = [dict(r) for r in record["rubrics"]]
    diags = list(record.get("diagnostics") or ())
    for r in rubrics:
        if r["id"] in ids:
            _merge(judge.cfg, r, out, diags)
    counts = {v: sum(r["verdict"] == v for r in rubrics)
              for v in ("pass", "fail", "error", "unjudged")}
    info = {"model": judge.cfg.model, "prompt_version": judge.cfg.prompt_version,
            "rubrics": ids, "cached": out.cached, "usage": out.usage.to_json(judge.cfg)}
    if out.error:
        info["error"] = out.error[:1000]
    if out.trajectory is not None:
        info["trajectory"] = out.trajectory
    return {**record, "rubrics": rubrics, "diagnostics": diags, "rubric_counts": counts,
            "reward": round(gated_reward(record.get("gate"), rubrics, reward), 6),
            "judge": info}


def _merge(cfg: JudgeConfig, r: dict, out: Outcome, diags: list[dict]) -> None:
    """One rubric's verdict record after judging (in place), and its findings."""
    probed = r["verdict"] in ("pass", "fail")  # before judging, only a probe (or its gate)
    if out.judgements is None:
        if not probed:
            r.update(verdict="error", error_source="judge", decided_by="judge",
                     message=out.error)
        r["judge"] = {"verdict": "error"}
        return
    j = out.judgements[r["id"]]
    r["judge"] = {"verdict": j.verdict, "severity": j.severity, "issues": len(j.issues)}
    if probed:
        r["judge"]["agree"] = j.verdict == r["verdict"]
    if not probed or cfg.prefer == "judge":
        r.pop("ran", None)
        r.update(verdict=j.verdict, severity=j.severity, decided_by="judge", failed_step=None,
                 message=None if j.verdict == "pass" else
                 (j.issues[0].issue[:500] if j.issues else "the judge failed this rubric"))
    else:
        r["decided_by"] = "probe"
    if j.verdict == "fail":
        diags.extend(_finding(r, j, issue) for issue in j.issues)


def _finding(r: dict, j: Judgement, issue: Issue) -> dict:
    return Diagnostic(
        kind="judge_finding", reason=Reason.JUDGE_FINDING, stage="rubric",
        severity=j.severity or "severe", message=issue.issue[:2000], rubric_id=r["id"],
        evidence_code=issue.code[:4000] or None, evidence_line=issue.line,
        locator=issue.selector, selector=issue.selector, handler=issue.handler,
        state_var=issue.state, judge_severity=j.said).to_json()
