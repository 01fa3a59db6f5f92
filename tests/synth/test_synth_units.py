"""Task synthesis without a browser: reading drafts, near-duplicates, rewrites, mutants,
the offline generator and the decisions taken from scored records."""

from __future__ import annotations

import json
import re

import pytest

from evaluators.localize.graph import build_graph
from evaluators.synth import offline
from evaluators.synth.draft import DraftError, parse_draft, shingles, similarity
from evaluators.synth.faults import MARKUP
from evaluators.synth.rewrite import rewrite
from evaluators.synth.validate import Outcome, ValidateConfig, decide, screen

DRAFT = {"request": "Build a counter: #count starts at 0, #inc adds one.", "domain": "games",
         "kind": "counter", "difficulty": "easy",
         "rubrics": [{"id": "starts", "text": "shows 0", "kind": "initial", "importance": "core",
                      "probe": {"steps": [{"expect": "text", "locator": "#count", "value": "0"}]}}],
         "reference_html": "<p id='count'>0</p><button id='inc'>+</button>"}


def test_a_draft_is_read_from_bare_or_fenced_json():
    d = parse_draft(json.dumps(DRAFT), "t/1", {"drafter": "test"})
    assert d.request.startswith("Build a counter") and d.reference.startswith("```html")
    fenced = parse_draft("Here:\n```json\n" + json.dumps(DRAFT) + "\n```", "t/2", {})
    assert fenced.rubrics == d.rubrics


@pytest.mark.parametrize("broken, field", [
    ({k: v for k, v in DRAFT.items() if k != "reference_html"}, "reference_html"),
    ({**DRAFT, "rubrics": "none"}, "rubrics"),
    ({**DRAFT, "rubrics": []}, "no rubrics"),
    ({**DRAFT, "rubrics": [{**DRAFT["rubrics"][0], "kind": "sometimes"}]}, "kind"),
])
def test_a_broken_draft_names_its_field(broken, field):
    with pytest.raises(DraftError, match=field):
        parse_draft(json.dumps(broken), "t/1", {})
    with pytest.raises(DraftError, match="not JSON .* line 1"):
        parse_draft("{'request': 1}", "t/1", {})


def test_near_duplicate_requests_are_screened_out_in_order():
    drafts = offline.drafts(30)
    twin = drafts[3].__class__(**{**drafts[3].__dict__, "id": "synth/twin",
                                  "request": drafts[3].request + " Thanks!"})
    out = Outcome()
    kept = screen([*drafts, twin, DraftError("t/x: not JSON", "t/x", "games", "quiz")],
                  ValidateConfig(), out)
    assert twin not in kept and drafts[3] in kept
    assert {(d["id"], d["check"]) for d in out.dropped} >= {("synth/twin", "duplicate"),
                                                            ("t/x", "unparseable")}
    assert similarity(shingles("a b c d"), shingles("a b c d")) == 1.0
    assert similarity(shingles("one two three four"), shingles("five six seven eight")) == 0.0


def test_the_offline_generator_is_deterministic_and_in_the_task_format():
    a, b = offline.drafts(60, seed=3), offline.drafts(60, seed=3)
    assert [d.task() for d in a] == [d.task() for d in b]
    assert {d.kind for d in a} == set(offline.ALL_KINDS)
    for d in a:
        d.check()
        assert len(d.rubrics) >= 2 and any(r["kind"] == "dynamic" for r in d.rubrics)
    assert offline.drafts(1, seed=4)[0].task() != a[0].task()


def test_a_rewrite_renames_bindings_but_not_what_the_page_reaches_by_name():
    app = ("```html\n<button onclick='inc()'>+</button><p id='out'></p><script>\n"
           "let total = 0; const cfg = {step: 2};\n"
           "function render() { document.getElementById('out').textContent = total; }\n"
           "function inc() { total += cfg.step; render(); }\n"
           "function shown(label) { return label + window['total']; }\n</script>\n```")
    new = rewrite(app)
    assert new is not None and new != app
    assert "function inc()" in new  # bound from the markup's onclick
    assert "cfg" not in new and "render" not in new  # its own bindings, renamed
    assert "step" in new  # a property name
    assert "total" in new  # named in a string (window['total'])
    # Function declarations are reversed: the last one (reading window['total']) comes first.
    script = new.split("<script>")[1]
    assert script.index("window['total']") < script.index("textContent")
    assert rewrite("```html\n<p>static</p>\n```") is None
    assert rewrite("```html\n<script>let x = ;</script>\n```") is None


def test_markup_faults_reach_what_an_app_shows_before_its_scripts_run():
    html = ("<input id='n' type='number' value='3'><p id='out'>Total: 3</p>"
            "<button id='go' disabled>Go</button>")
    g = build_graph(html)
    found = {k: [m.apply(html) for m in sites(g, None)] for k, sites in MARKUP.items()}
    assert any("id='out'" not in m and "Total" not in m for m in found["element_dropped"])
    assert any("id='nx'" in m for m in found["id_renamed"])
    assert any("type='text'" in m for m in found["attribute_changed"])
    assert any("value='4'" in m for m in found["attribute_changed"])
    assert any(re.search(r"<button id='go' *>", m) for m in found["attribute_changed"])
    assert any("Total: 4" in m for m in found["text_changed"])


def _rec(verdicts: dict[str, str], gate=None, status="ok") -> dict:
    return {"status": status, "gate": gate, "error": "browser died" if status != "ok" else None,
            "rubrics": [{"id": k, "verdict": v, "message": f"{k} {v}"} for k, v in verdicts.items()]}


def _two_probe_draft():
    d = offline.drafts(1)[0]
    ids = [r["id"] for r in d.rubrics if r.get("probe")]
    return d, ids[0], ids[1]


def test_decisions_from_scored_records():
    d, a, b = _two_probe_draft()
    cfg = ValidateConfig(runs=3)
    every = {r["id"]: "pass" for r in d.rubrics if r.get("probe")}
    refs = [("reference", _rec(every))] * 3
    # b flips between runs: judge-only as flaky; a is caught by a mutant and robust: kept.
    flaky = [("reference", _rec(every)), ("reference", _rec({**every, b: "fail"})),
             ("reference", _rec(every)), ("rewrite", _rec(every)), ("mutant", _rec({**every, a: "fail"}))]
    out = Outcome()
    decide(d, flaky, cfg, out)
    (task,) = out.tasks
    probes = {r["id"]: r["probe"] for r in task["rubrics"]}
    assert probes[a] is not None and probes[b] is None
    assert [(j["rubric"], j["check"]) for j in out.judge_only if j["rubric"] == b] == [(b, "flaky")]
    assert task["meta"]["validation"]["rubrics"][a]["mutants_failed"] == 1
    # A probe that fails on the rewrite tests how the code is written.
    out = Outcome()
    decide(d, refs + [("rewrite", _rec({**every, a: "fail"})),
                      ("mutant", _rec({k: "fail" for k in every}))], cfg, out)
    assert ("robust" in {j["check"] for j in out.judge_only}) and out.tasks
    # The reference failing a probe in every run drops the draft; so does a failed gate.
    for scored, why in ((refs[:0] + [("reference", _rec({**every, a: "fail"}))] * 3, "fails rubric"),
                        ([("reference", _rec(every, gate="runtime"))] * 3, "fails gate runtime")):
        out = Outcome()
        decide(d, scored, cfg, out)
        assert not out.tasks and out.dropped[0]["check"] == "reference" and why in out.dropped[0]["why"]
    # No mutant caught any probe: nothing left to keep.
    out = Outcome()
    decide(d, refs + [("mutant", _rec(every))], cfg, out)
    assert not out.tasks and out.dropped[0]["check"] == "probes_left"
    # An evaluator failure is counted apart, never held against the draft.
    out = Outcome()
    decide(d, refs + [("mutant", _rec(every, status="error"))], cfg, out)
    assert out.dropped[0]["check"] == "evaluator_error"


def test_difficulty_is_measured_from_answers_when_there_are_some():
    from evaluators.synth.pipeline import measured_difficulty

    tasks = [{"id": i, "meta": {"difficulty": "medium"}} for i in ("a", "b", "c", "d")]
    recs = [_rec({"x": "pass", "y": "pass", "z": "pass"}) | {"task_id": "a"},
            _rec({"x": "pass", "y": "fail", "z": "fail"}) | {"task_id": "b"},
            _rec({"x": "pass", "y": "pass", "z": "fail"}) | {"task_id": "b"},
            _rec({"x": "fail"}) | {"task_id": "c"},
            _rec({"x": "pass"}, status="error") | {"task_id": "d"}]
    measured_difficulty(tasks, recs)
    assert [t["meta"]["difficulty"] for t in tasks] == ["easy", "medium", "hard", "medium"]
    assert tasks[1]["meta"]["pass_rate"] == 0.5 and tasks[1]["meta"]["drafted_difficulty"] == "medium"
    assert "pass_rate" not in tasks[3]["meta"]  # an evaluator error measures nothing


def test_later_rounds_score_the_next_mutants_on_the_undecided_probes_only(monkeypatch):
    from evaluators.synth import validate

    d = offline.drafts(1)[0]
    cfg = ValidateConfig(runs=2, mutants=8, mutant_rounds=(2, 3))
    mutants = validate._mutants(d, cfg)
    first, second, *never = [r["id"] for r in d.rubrics if r.get("probe")]
    assert len(mutants) == 8 and never
    # The mutant (by index) that fails each probe: one in the first round, one in the second;
    # the others are never caught, so they stay open to the last mutant.
    catches = {first: 1, second: 4}
    sent, asked = [], []  # per round: the mutants scored; the probes each row was scored on

    def score(rows, tasks, eval_cfg, workers, records):
        sent.append([mutants.index(r["response"]) for r in rows if r["role"] == "mutant"])
        asked.append(set())
        for row in rows:
            task = tasks[row["task_id"]]
            i = mutants.index(row["response"]) if row["role"] == "mutant" else None
            verdicts = {r.id: "fail" if i is not None and catches.get(r.id) == i else "pass"
                        for r in task.rubrics if r.probe is not None}
            asked[-1].add(tuple(sorted(verdicts)))
            records[row.get("of", row["task_id"])].append((row["role"], _rec(verdicts)))

    monkeypatch.setattr(validate, "_score", score)
    out = Outcome()
    validate.run_checks([d], None, cfg, 1, out)
    # Round 1: every probe, with the references, the rewrite and the first 2 mutants; round 2:
    # the next 3 mutants, without the probe mutant 1 failed; round 3: the rest, only on the
    # probes no mutant has failed.
    assert sent == [[0, 1], [2, 3, 4], [5, 6, 7]]
    assert asked == [{tuple(sorted([first, second, *never]))}, {tuple(sorted([second, *never]))},
                     {tuple(sorted(never))}]
    (task,) = out.tasks
    stats = task["meta"]["validation"]["rubrics"]
    assert [stats[r]["mutants"] for r in (first, second, *never)] == [2, 5] + [8] * len(never)
    assert stats[first]["mutants_failed"] == stats[second]["mutants_failed"] == 1
    kept = {r["id"]: r["probe"] for r in task["rubrics"]}
    assert kept[first] and kept[second] and all(kept[r] is None for r in never)
    assert {j["rubric"]: j["check"] for j in out.judge_only} == {r: "discriminates" for r in never}


def test_a_journal_replays_complete_chunks_and_refuses_what_it_cannot_continue(tmp_path):
    from evaluators.synth.progress import Journal, JournalError

    path = tmp_path / "t.progress.jsonl"
    settings = {"offline": True, "validation": {"runs": 3, "mutant_rounds": (2, 4)}}
    j = Journal(path, settings, resume=False)
    chunk = Outcome(tasks=[{"id": "a"}], references=[{"task_id": "a"}],
                    dropped=[{"id": "b", "check": "duplicate"}],
                    judge_only=[{"id": "a", "rubric": "r", "check": "robust"}])
    j.record(chunk, [("request a", "a")], drafts=2, seconds=1.5)
    # A second chunk cut off by a crash: its lines are there, its end marker is not, and the
    # last line was written only in part.
    with path.open("a") as f:
        f.write(json.dumps({"kind": "task", "task": {"id": "c"}, "reference": {}}) + "\n")
        f.write('{"kind": "chunk", "dra')
    again = Journal(path, settings, resume=True)
    assert (again.made, again.seconds, again.seen) == (2, 1.5, [("request a", "a")])
    assert (again.outcome.tasks, again.outcome.dropped, again.outcome.judge_only) == (
        chunk.tasks, chunk.dropped, chunk.judge_only)

    with pytest.raises(JournalError, match="--resume"):
        Journal(path, settings, resume=False)  # never overwritten
    with pytest.raises(JournalError, match=r"validation=.*'runs': 2"):
        Journal(path, {**settings, "validation": {"runs": 2, "mutant_rounds": (2, 4)}}, True)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "not json\n" + "".join(lines[1:]))
    with pytest.raises(JournalError, match=r"progress.jsonl:2: unreadable"):
        Journal(path, settings, resume=True)


def test_the_package_runs_as_the_synth_command(tmp_path):
    # `python -m evaluators.synth` is the same command as `python -m evaluators synth`: the
    # same parser, so a missing --out is named the same way, before anything is drafted.
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    got = subprocess.run([sys.executable, "-m", "evaluators.synth", "--offline", "--count", "1"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
    assert got.returncode == 2, got.stderr
    assert "python -m evaluators synth" in got.stderr and "--out" in got.stderr
