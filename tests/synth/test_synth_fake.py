"""The model-drafted pipeline end to end: a scripted OpenAI-compatible server returns stored
drafts, broken ones among them, and validation in real Chromium keeps exactly the valid ones
and says why each other one was dropped."""

from __future__ import annotations

import json
import re

import pytest

from evaluators.__main__ import main
from evaluators.judge.fake import FakeJudgeServer, Reply

pytestmark = pytest.mark.browser


def _draft(request: str, rubrics: list[dict], body: str, script: str = "") -> dict:
    html = f"<!DOCTYPE html><html><body>{body}<script>{script}</script></body></html>"
    return {"request": request, "domain": "games", "kind": "counter", "difficulty": "easy",
            "rubrics": rubrics, "reference_html": html}


def _r(rid: str, kind: str, steps: list[dict], importance: str = "core") -> dict:
    return {"id": rid, "text": rid.replace("-", " "), "kind": kind, "importance": importance,
            "probe": {"steps": steps, "timeout_ms": 2000}}


COUNTER_BODY = "<h1>Tally</h1><p id='count'>0</p><button id='inc'>+1</button>"
COUNTER_JS = ("let clicks = 0; document.getElementById('inc').onclick = () => {"
              " clicks += 1; document.getElementById('count').textContent = clicks; };")
STARTS = _r("starts-at-zero", "initial", [{"expect": "text", "locator": "#count", "value": "0"}])
CLICK = _r("one-click", "dynamic", [{"do": "click", "locator": "#inc"},
                                    {"expect": "text", "locator": "#count", "value": "1"}])
DRAFTS = {
    "valid-counter": _draft("Build a tally counter: #count shows 0 and the button #inc adds one "
                            "to it on each click.", [STARTS, CLICK], COUNTER_BODY, COUNTER_JS),
    "valid-toggle": _draft(
        "Make a page whose button #toggle shows and hides the panel #panel, hidden at first.",
        [_r("hidden-first", "initial", [{"expect": "hidden", "locator": "#panel"}]),
         _r("shows", "dynamic", [{"do": "click", "locator": "#toggle"},
                                 {"expect": "visible", "locator": "#panel"}])],
        "<button id='toggle'>Toggle</button><div id='panel' hidden>Hi</div>",
        "document.getElementById('toggle').onclick = () => { const p = "
        "document.getElementById('panel'); p.hidden = !p.hidden; };"),
    "name-bound": _draft(
        "A click counter for a quiz show: #score starts at 0; #point adds one point per click.",
        [_r("adds", "dynamic", [{"do": "click", "locator": "#point"},
                                {"expect": "text", "locator": "#score", "value": "1"}]),
         _r("state-variable", "dynamic", [{"do": "click", "locator": "#point"},
                                          {"save": "n", "eval": "() => points"},
                                          {"assert": "equal", "left": {"var": "n"}, "right": 1}],
            "behavior")],
        "<p id='score'>0</p><button id='point'>Point</button>",
        "let points = 0; document.getElementById('point').onclick = () => { points += 1;"
        " document.getElementById('score').textContent = points; };"),
    "never-fails": _draft("A welcome page with a big heading and a short paragraph of text.",
                          [_r("heading", "initial", [{"expect": "visible", "locator": "h1"}])],
                          "<h1>Welcome</h1><p>Nice to see you.</p>"),
    "fails-on-reference": _draft(
        "A counter whose display #count starts at 5, with a button #inc adding one.",
        [_r("starts-at-five", "initial", [{"expect": "text", "locator": "#count", "value": "5"}])],
        COUNTER_BODY, COUNTER_JS),
    "throws": _draft("A stopwatch with #start and #display that counts seconds from 0.",
                     [_r("display", "initial", [{"expect": "text", "locator": "#display", "value": "0"}])],
                     "<p id='display'>0</p><button id='start'>Start</button>", "startWatch();"),
    "duplicate": _draft("Build a tally counter: #count shows 0 and the button #inc adds one "
                        "to it on each click, please.", [STARTS, CLICK], COUNTER_BODY, COUNTER_JS),
}
CASES = [*DRAFTS, "unparseable"]


def _answer(body: dict) -> Reply:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    case = re.search(r"case:([\w-]+)", user).group(1)
    if case == "unparseable":
        return Reply("Sorry, I cannot help with that.")
    return Reply("```json\n" + json.dumps(DRAFTS[case]) + "\n```")


def test_the_pipeline_keeps_exactly_the_valid_drafts(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"case:{c}\n" for c in CASES))
    out, refs = tmp_path / "tasks.jsonl", tmp_path / "refs.jsonl"

    def synth(server, drafts, *more):
        return main(["synth", "--base-url", server.base_url, "--model", "fake-drafter",
                     "--seeds", str(seeds), "--count", str(len(CASES)), "--chunk", "3",
                     "--max-drafts", str(drafts), "--out", str(out), "--references", str(refs),
                     "--workers", "1", "--pages", "4", *more])

    # The run stops after its first chunk (3 drafts) and is resumed: the second run drafts
    # only the other 5, and the result is that of one run (the near-duplicate, in the last
    # chunk, is caught against a request the first run screened in).
    with FakeJudgeServer(default=_answer) as server:
        assert synth(server, 3) == 0 and len(server.requests) == 3
        assert synth(server, len(CASES)) == 2  # the journal is never overwritten
        assert synth(server, len(CASES), "--resume") == 0
    assert len(server.requests) == len(CASES)
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    report = json.loads((tmp_path / "tasks.report.json").read_text())
    spec_of = {t["id"]: t["meta"]["provenance"]["spec"]["seed"] for t in tasks}
    assert sorted(spec_of.values()) == ["case:name-bound", "case:valid-counter", "case:valid-toggle"]
    seed_of = {f"synth/seed-{i:05d}": c for i, c in enumerate(CASES)}
    why = {seed_of[d["id"]]: d["check"] for d in report["drops"]}
    assert why == {"never-fails": "probes_left", "fails-on-reference": "reference",
                   "throws": "reference", "duplicate": "duplicate", "unparseable": "unparseable"}
    assert report["dropped"] == {"unparseable": 1, "duplicate": 1, "reference": 2, "probes_left": 1}
    # The probe that reads a variable by name fails on the rewrite: judge-only, task kept.
    (bound,) = [t for t in tasks if spec_of[t["id"]] == "case:name-bound"]
    probes = {r["id"]: r["probe"] for r in bound["rubrics"]}
    assert probes["adds"] is not None and probes["state-variable"] is None
    kept_ids = {t["id"] for t in tasks}
    assert [j["check"] for j in report["judge_only"] if j["id"] in kept_ids] == ["robust"]
    # The heading probe could not fail on any mutant (there is none to make): judge-only,
    # which left its draft without a probe.
    assert [(seed_of[j["id"]], j["check"]) for j in report["judge_only"] if j["id"] not in kept_ids] \
        == [("never-fails", "discriminates")]
    assert all(t["meta"]["provenance"]["model"] == "fake-drafter" for t in tasks)
    assert [json.loads(x)["task_id"] for x in refs.read_text().splitlines()] == [t["id"] for t in tasks]
    # Training reads what synthesis wrote: the tasks through the tfds builder of a run, the
    # references as its SFT responses.
    from rcca_jax.train.config import DataConfig
    from rcca_jax.train.data import load_task_data, read_sft_examples

    cfg = DataConfig(source=str(out), eval_fraction=0.0, sft_source=str(refs))
    data = load_task_data(cfg, tmp_path / "work")
    assert sorted(data.train_ids) == sorted(kept_ids) and data.eval_ids == []
    assert {t: data.tasks[t].rubrics[0].id for t in kept_ids} == {
        t["id"]: t["rubrics"][0]["id"] for t in tasks}
    examples, counts = read_sft_examples(cfg, data)
    assert {(e.task_id, e.response) for e in examples} == {
        (r["task_id"], r["response"]) for r in map(json.loads, refs.read_text().splitlines())}
