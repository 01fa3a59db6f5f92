"""The fault injector of the localization benchmarks: every kind finds its sites in an app,
its mutants still parse (a fault the source gate would catch is no localization test), the
fault span holds the new code, and the task split is fixed by the task id."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from evaluators.synth.faults import FAULTS, UNSEEN, held_out  # noqa: E402

from evaluators.checks.extract import extract_app  # noqa: E402
from evaluators.checks.source import source_diagnostics  # noqa: E402
from evaluators.localize.graph import build_graph  # noqa: E402

APP = """```html
<style>#out { color: red; display: block; }</style>
<button id="inc">+</button><button id="reset">0</button><span id="out">0</span>
<script>
let count = 0;
let step = 1;
const out = document.getElementById('out');
const inc = document.getElementById('inc');
const reset = document.getElementById('reset');
function clamp(value, low) { return Math.max(value, low); }
function render() {
  out.textContent = count;
}
function onInc() {
  count = clamp(count + step, 0);
  render();
}
function onReset() {
  for (let i = 0; i < 3; i++) { step = step * 1; }
  count = 0;
  render();
}
inc.addEventListener('click', onInc);
reset.addEventListener('click', onReset);
setInterval(render, 1000);
</script>
```"""


@pytest.mark.parametrize("kind", sorted({**FAULTS, **UNSEEN}))
def test_every_kind_makes_mutants_that_still_parse(kind):
    ext = extract_app(APP)
    g = build_graph(APP, (ext.start, ext.end))
    sites = {**FAULTS, **UNSEEN}[kind](g, random.Random(0))
    assert sites, f"{kind}: no site in an app that has one"
    for m in sites:
        mutated = m.apply(APP)
        assert mutated != APP and m.kind == kind
        s, e = m.fault
        assert mutated[s:e] == (m.new.strip() or m.new)  # blanks around it are not the fault
        app = extract_app(mutated)
        severe = [d for d in source_diagnostics(app) if d["severity"] == "severe"]
        assert not severe, (kind, m, severe[0]["message"])


def test_the_held_out_split_is_fixed_by_the_task_id():
    ids = [f"task-{k}" for k in range(1000)]
    share = sum(map(held_out, ids)) / len(ids)
    assert 0.35 < share < 0.45
    assert [held_out(t) for t in ids] == [held_out(t) for t in ids]



def test_a_split_scores_the_mutants_its_tasks_get_in_a_run_of_every_task():
    """`--split dev` / `held-out` must score the mutants those tasks got in `--split all`."""
    import dataclasses

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.localization import BenchConfig, split_mutants

    def record(i: int) -> dict:
        app = APP.replace("count", f"count{i}").replace("step", f"step{i}")
        ext = extract_app(app)
        return {"task_id": f"t{i}", "model": "m", "response": app, "status": "ok", "gate": None,
                "rubrics": [{"verdict": "pass"}], "extraction": {"start": ext.start, "end": ext.end}}

    recs = [record(i) for i in range(12)]
    assert {held_out(r["task_id"]) for r in recs} == {False, True}  # both splits present
    cfg = BenchConfig(faults="all", seeds=(0,))
    key = lambda m: (m["task_id"], m["mutation"]["kind"], m["response"])  # noqa: E731
    _, every = split_mutants(recs, cfg)
    assert len(every) > len(recs)
    for split in ("dev", "held-out"):
        kept, drawn = split_mutants(recs, dataclasses.replace(cfg, split=split))
        assert {r["task_id"] for r in kept} == {r["task_id"] for r in recs
                                                if held_out(r["task_id"]) == (split == "held-out")}
        assert sorted(map(key, drawn)) == sorted(key(m) for m in every
                                                 if held_out(m["task_id"]) == (split == "held-out"))


def test_a_mutant_drawn_by_several_seeds_counts_once_under_the_first():
    """A response with one site of a kind gets that mutant from every seed: counted per seed it
    would weigh as many times as there are seeds, and a later seed would not be fresh data."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.localization import BenchConfig, distinct, make_mutants

    ext = extract_app(APP)
    rec = {"task_id": "t", "model": "m", "response": APP, "status": "ok", "gate": None,
           "rubrics": [{"verdict": "pass"}], "extraction": {"start": ext.start, "end": ext.end}}
    drawn = make_mutants([rec], BenchConfig(faults="unseen", seeds=(3, 1, 2)))
    once = distinct(drawn)
    texts = [m["response"] for m in once]
    assert len(texts) == len(set(texts)) < len(drawn)  # this app has kinds with one site
    for m in once:
        assert m["seed"] == min(d["seed"] for d in drawn if d["response"] == m["response"])


def test_skipping_tasks_leaves_a_set_disjoint_from_a_run_of_that_many():
    from localization import BenchConfig, chosen_tasks
    tasks = {f"t{i}": None for i in range(10)}
    first = chosen_tasks(tasks, BenchConfig(tasks=4))
    rest = chosen_tasks(tasks, BenchConfig(tasks=10, skip_tasks=4))
    assert first == {"t0", "t1", "t2", "t3"}
    assert rest == {f"t{i}" for i in range(4, 10)}


def test_a_later_seed_alone_leaves_out_what_the_excluded_seeds_draw():
    """`--exclude-seeds 0 --seeds 1` is seed 1's batch less every mutant seed 0 draws (the
    fresh mutants a `--seeds 0 1` run counts under seed 1), with nothing of seed 0 scored."""
    import dataclasses

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.localization import BenchConfig, distinct, split_mutants

    ext = extract_app(APP)
    rec = {"task_id": "t", "model": "m", "response": APP, "status": "ok", "gate": None,
           "rubrics": [{"verdict": "pass"}], "extraction": {"start": ext.start, "end": ext.end}}
    cfg = BenchConfig(faults="unseen", seeds=(1,), per_kind=2)
    _, alone = split_mutants([rec], dataclasses.replace(cfg, exclude_seeds=(0,)))
    _, both = split_mutants([rec], dataclasses.replace(cfg, seeds=(0, 1)))
    fresh = [m["response"] for m in distinct(both) if m["seed"] == 1]
    assert sorted(m["response"] for m in alone) == sorted(fresh)
    _, first = split_mutants([rec], dataclasses.replace(cfg, seeds=(0,)))
    assert alone and len(alone) < len(split_mutants([rec], cfg)[1])
    assert not {m["response"] for m in alone} & {m["response"] for m in first}


def test_kinds_keeps_only_the_named_fault_kinds():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.localization import BenchConfig, make_mutants

    ext = extract_app(APP)
    rec = {"task_id": "t", "model": "m", "response": APP, "status": "ok", "gate": None,
           "rubrics": [{"verdict": "pass"}], "extraction": {"start": ext.start, "end": ext.end}}
    every = make_mutants([rec], BenchConfig(faults="unseen", per_kind=50))
    only = make_mutants([rec], BenchConfig(faults="unseen", per_kind=50,
                                           kinds=("loop_bound", "early_return")))
    assert {m["mutation"]["kind"] for m in only} == {"loop_bound", "early_return"}
    assert sorted(m["response"] for m in only) == sorted(
        m["response"] for m in every if m["mutation"]["kind"] in ("loop_bound", "early_return"))
