"""Fault-injection benchmark of rubric-to-code localization (issue 3).

Takes recorded InteractScience answers whose probes all pass, injects one fault at a time with
tree-sitter (a wrong handler in a binding, a wrong id in a DOM query, a swapped operator, a
changed constant, a removed state update, a changed CSS value), scores every mutant with the
evaluator (precise coverage on), keeps the mutants some probe catches, localizes them with each
method and reports, per fault kind:

- hit@dir: the mutated span lies inside S_dir (the union over the diagnostics that count);
- hit@dir+ctx: inside S_dir ∪ S_ctx;
- prec: S_dir precision, mutated characters / S_dir characters (0 when S_dir is empty);
- dir%: S_dir characters / app characters;
- w-ratio: share of the total base weight on the faulty tokens, divided by their share under
  uniform weights (GRPO), tokens from a byte-level BPE trained here on the answers;
- w-oracle: the same if every counted diagnostic blamed exactly the faulty tokens (the most
  the weights allow: ``direct`` for one diagnostic, ``cap`` for several).

Scored records are cached under ``runs/localization/`` (``--cache``; keyed by task and
response text), so a second run only localizes. Mutants whose every failure is a hang or
time-out are dropped: on a loaded machine those are more often the machine's than the fault's.

Run:
  python benchmarks/localization.py [--models gemini-2.5-pro claude-sonnet-4-20250514]
      [--tasks 40] [--skip-tasks 0] [--per-kind 1] [--seeds 0 1] [--limit N] [--pages 3]
      [--fresh] [--fresh-mutants] [--no-rules] [--faults seen|unseen|all] [--split all|dev|held-out]
      [--rank-grid] [--misses] [--cache DIR] [--kinds loop_bound ...] [--exclude-seeds 0 ...]
      [--recheck]

The fault kinds live in ``evaluators/synth/faults.py``: ``--faults seen`` (default) are the six
above, which the rules were written while looking at; ``--faults unseen`` are eight kinds no
rule was written for (swapped arguments, a wrong variable, an off-by-one loop bound, an early
return, a wrong property name, a listener on the wrong element, a timer never started, state
reset in the wrong place). ``--split`` keeps the tasks of the development or the held-out split
(``faults.held_out``: 40% of tasks by a hash of the id, fixed before any rule for the unseen
kinds is written).

Targets (default method ``grounded``): hit@dir >= 70%, hit@dir+ctx >= 90%, w-ratio >= 3.
With the default ``WeightConfig`` a single diagnostic cannot give more than 3x (``direct``)
and several no more than 4x (``cap``): w-oracle shows the bound for the same diagnostics.
Several seeds (``--seeds 0 1``) also print the ALL rows per seed, so that a seed whose mutants
were never looked at while writing the rules serves as a held-out set.

A mutant drawn by several seeds (a response with one site of a kind gets the same mutant from
every seed) is scored and counted once, under the first seed that drew it: the ``ALL seed N``
rows hold only the mutants seed N drew first. ``--exclude-seeds 0`` leaves out (unscored) every
mutant seed 0 draws: a later seed's batch alone, per kind, as a fresh held-out set whose earlier
seed need not be scored. ``--kinds`` keeps some fault kinds only (with a large ``--per-kind``,
every site of them); the draw then differs from a run of every kind. ``--recheck`` scores the
caught mutants and their originals once more and counts a mutant only when its failure comes
back (a probe that failed by timing is not the fault's). Figures, with the commands that made
them, are in the README.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from evaluators.contract import STOPPED, read_record  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.localize.api import localize_record, weights_from_spans  # noqa: E402
from evaluators.localize.graph import build_graph  # noqa: E402
from evaluators.localize.rules import LocalizeConfig  # noqa: E402
from evaluators.localize.spans import METHODS, merge_spans  # noqa: E402
from evaluators.localize.tokens import span_mask, token_char_ranges  # noqa: E402
from evaluators.fleet.pool import score_rows_async  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import Task, load_responses, load_tasks  # noqa: E402
from evaluators.synth.faults import FAULTS, UNSEEN, Mutation, held_out  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"
CACHE = REPO / "runs" / "localization"
MODELS = ("gemini-2.5-pro", "claude-sonnet-4-20250514", "gpt-4o")
# Failures of a page that stopped, or ran out of time (`limit_ms`): not counted as caught.
_STOPPED = {r.value for r in STOPPED}
KINDS = {"seen": FAULTS, "unseen": UNSEEN, "all": {**FAULTS, **UNSEEN}}
SPLITS = ("all", "dev", "held-out")
ORDER = ("naive", "sbfl", "text", "grounded")  # the table's method rows, baselines first
# `oracle` blames the credit-assignment testbed's injected bug (`meta.sft_bug`), which no
# mutant here carries: it would read 0% on every row, so it is not a method of this table.
BENCH_METHODS = tuple(m for m in METHODS if m != "oracle")


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What the benchmark runs.

    Attributes:
        models: Answer files to draw from. tasks: the first N tasks of each. skip_tasks:
            leave out the first N of those (a set of tasks disjoint from a run with
            ``tasks=N``, for a held-out set nobody has read).
        per_kind: Mutants drawn per fault kind and response. limit: at most this many
            mutants per seed.
        pages: Browser pages in flight. seeds: mutant samplings, one batch each (a later
            seed's batch can serve as a held-out set). fresh: ignore the cache.
        fresh_mutants: score the mutants again but keep the cached originals (after an
            evaluator change, so that the same mutants are compared).
        rules: print the per-rule hit and ablation table (one more localization of every
            mutant per rule that blamed anything).
        faults: which fault kinds (``KINDS``): ``seen``, the six the rules were written
            while looking at; ``unseen``, the eight of ``faults.UNSEEN``; ``all``.
        split: which tasks (``faults.held_out``): ``dev``, ``held-out`` or ``all``.
        rank_grid: also try the scored combiner's settings (``RANK_GRID``), chosen on dev.
        misses: list the development split's misses of ``grounded`` (never the held-out's).
        kinds: only these fault kinds of ``faults`` (None: all of them).
        exclude_seeds: leave out the mutants these seeds draw (neither scored nor counted).
        recheck: score each caught mutant and its original once more and keep the mutant
            only when something it failed fails again while the original passes it again.
    """

    models: tuple[str, ...] = MODELS[:2]
    tasks: int = 40
    skip_tasks: int = 0
    per_kind: int = 1
    limit: int | None = None
    pages: int = 3
    seeds: tuple[int, ...] = (0,)
    fresh: bool = False
    fresh_mutants: bool = False
    rules: bool = True
    faults: str = "seen"
    split: str = "all"
    rank_grid: bool = False
    misses: bool = False
    kinds: tuple[str, ...] | None = None
    exclude_seeds: tuple[int, ...] = ()
    recheck: bool = False


def make_mutants(records: list[dict], cfg: BenchConfig) -> list[dict]:
    """Rows to score: per seed, ``per_kind`` random faults of each kind per passing record."""
    return [row for seed in cfg.seeds for row in _mutants(records, cfg, seed)]


def split_mutants(originals: list[dict], cfg: BenchConfig) -> tuple[list[dict], list[dict]]:
    """The scored originals of ``cfg.split``'s tasks and the mutants to score for them.

    Mutants are drawn from every task's passing answers (one generator runs through them all)
    and the split is taken afterwards, so that `--split dev` or `held-out` scores the very
    mutants those tasks got in a `--split all` run of the same seed.
    """
    def in_split(task_id: str) -> bool:
        return cfg.split == "all" or held_out(task_id) == (cfg.split == "held-out")

    passing = [r for r in originals if all_pass(r)]
    drawn = make_mutants(passing, cfg)
    if cfg.exclude_seeds:
        seen = {_key(m) for m in make_mutants(passing, dataclasses.replace(
            cfg, seeds=cfg.exclude_seeds, exclude_seeds=()))}
        drawn = [m for m in drawn if _key(m) not in seen]
    return ([r for r in originals if in_split(r["task_id"])],
            [m for m in drawn if in_split(m["task_id"])])


def _mutants(records: list[dict], cfg: BenchConfig, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for rec in records:
        ext = rec["extraction"]
        g = build_graph(rec["response"], (ext["start"], ext["end"]))
        for kind, sites in KINDS[cfg.faults].items():
            if cfg.kinds is not None and kind not in cfg.kinds:
                continue
            found = sites(g, rng)
            for m in rng.sample(found, min(cfg.per_kind, len(found))):
                rows.append({"task_id": rec["task_id"], "model": rec["model"],
                             "response": m.apply(rec["response"]),
                             "mutation": dataclasses.asdict(m), "seed": seed})
    rng.shuffle(rows)
    return rows[:cfg.limit] if cfg.limit else rows


# -- scoring ----------------------------------------------------------------------------------

def _key(row: dict) -> str:
    return hashlib.sha1(f"{row['task_id']}\0{row['response']}".encode()).hexdigest()


def score_cached(rows: list[dict], tasks: dict[str, Task], cfg: BenchConfig,
                 fresh: bool = False, file: str = "scored.jsonl") -> list[dict]:
    """Evaluator records of ``rows`` (coverage on), from the cache ``file`` when already
    scored and not ``fresh`` (new records replace cached ones)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / file
    cached: dict[str, dict] = {}
    if path.exists():
        with path.open(encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                cached[rec["_key"]] = rec
    todo = [r for r in rows if fresh or _key(r) not in cached]
    if todo:
        ev = EvalConfig()
        # Generous limits: the benchmark shares two cores with other jobs, and a page that is
        # only slow must not pass for a mutant that hangs.
        ev = dataclasses.replace(ev, browser=dataclasses.replace(
            ev.browser, coverage=True, coverage_passing=True, trace_writers=True,
            pages_per_worker=cfg.pages,
            hang_timeout_ms=20_000,
            load_timeout_ms=60_000, probe_time_limit_ms=60_000))
        with path.open("a", encoding="utf-8") as out:
            def save(_: int, rec: dict) -> None:
                rec["_key"] = _key(rec)
                out.write(json.dumps(rec) + "\n")
                out.flush()
                cached[rec["_key"]] = rec

            t0 = time.perf_counter()
            asyncio.run(score_rows_async(todo, tasks, ev, on_result=save))
            print(f"scored {len(todo)} responses in {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)
    return [{**cached[_key(r)], **{k: v for k, v in r.items() if k != "response"}}
            for r in rows]


def distinct(mutants: list[dict]) -> list[dict]:
    """Each mutant once, under the first seed that drew it. A response with one site of a
    kind gets the same mutant from every seed: counted per seed, it would weigh as many times
    as there are seeds, and a later seed's row would not be fresh data."""
    seen: set[str] = set()
    out = []
    for m in sorted(mutants, key=lambda m: m.get("seed", 0)):
        if _key(m) not in seen:
            seen.add(_key(m))
            out.append(m)
    return out


def all_pass(rec: dict) -> bool:
    probed = [r for r in rec.get("rubrics", ()) if r["verdict"] != "unjudged"]
    return (rec.get("status") == "ok" and rec.get("gate") is None and bool(probed)
            and all(r["verdict"] == "pass" for r in probed))


def caught(rec: dict) -> bool:
    """Some probe or gate failed, for a reason other than a hang or a time-out."""
    if rec.get("status") != "ok" or all_pass(rec):
        return False
    rec = read_record(rec)
    return any(d["reason"] not in _STOPPED and d.get("limit_ms") is None
               for d in rec["diagnostics"]
               if d["kind"] in ("probe_failure", "runtime_failure", "page_error", "syntax_error"))


def failures(rec: dict) -> set[str]:
    """What a record failed, as ``caught`` counts it: each failing rubric's id, and the kind of
    an error of the whole page (an exception, a syntax error)."""
    rec = read_record(rec)
    return {d.get("rubric_id") or d["kind"] for d in rec["diagnostics"]
            if d["kind"] in ("probe_failure", "runtime_failure", "page_error", "syntax_error")
            and d["reason"] not in _STOPPED and d.get("limit_ms") is None}


def reproduced(kept: list[dict], originals: list[dict], tasks: dict[str, Task],
               cfg: BenchConfig) -> list[dict]:
    """The caught mutants whose failure comes back: scored once more (cached apart, in
    ``rechecked.jsonl``), with their originals, a mutant stays when something it failed both
    times the original passes on its second scoring too. A probe that fails by timing on a
    busy machine (an animation that had not yet advanced) is then not charged to the fault,
    nor to localization."""
    base = {(r["task_id"], r["model"]): r for r in originals}
    fields = ("task_id", "model", "response", "mutation", "seed")
    rows = [{k: m[k] for k in fields if k in m} for m in kept]
    rows += [{k: base[m["task_id"], m["model"]][k] for k in fields[:3]} for m in kept]
    scored = score_cached(rows, tasks, cfg, file="rechecked.jsonl")
    again, calm = scored[:len(kept)], scored[len(kept):]
    return [m for m, a, o in zip(kept, again, calm)
            if (failures(m) & failures(a)) - failures(o)]


# -- metrics ----------------------------------------------------------------------------------

def train_tokenizer(texts: list[str]):
    """A byte-level BPE (8k merges) trained on the answers: realistic token lengths offline."""
    import tokenizers
    import transformers

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=8192, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok)


def _inside(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


def _overlap(span: tuple[int, int], spans: list[tuple[int, int]]) -> int:
    return sum(max(0, min(span[1], e) - max(span[0], s)) for s, e in spans)


def _rules_of(evidence: dict) -> list[str]:
    """Every rule that blamed an evidence item's span (the first, then the others)."""
    return [evidence["rule"], *evidence.get("also", ())]


def measure(rec: dict, task: Task, method: str, ranges: np.ndarray,
            rules: LocalizeConfig = LocalizeConfig()) -> dict:
    """hit@dir, hit@dir+ctx, precision, dir share and weight ratio of one localized mutant,
    and the rules whose direct blame holds the fault (``rules_hit``)."""
    out = localize_record(rec, method, task=task, rules=rules)
    counted = [d for d in out["diagnostics"] if d.get("weighted")]
    s_dir = merge_spans(tuple(s) for d in counted for s in d["s_dir"])
    s_all = merge_spans([*s_dir, *(tuple(s) for d in counted for s in d["s_ctx"])])
    fault = tuple(Mutation(**rec["mutation"]).fault)
    dir_chars = sum(e - s for s, e in s_dir)
    w, _ = weights_from_spans(ranges, [(d["s_dir"], d["s_ctx"]) for d in counted])
    faulty = span_mask(ranges, [fault])
    ratio = (w[faulty].sum() / w.sum()) / (faulty.sum() / len(w)) if faulty.any() else 1.0
    # The same diagnostics blaming exactly the faulty tokens: the most the weights can give.
    best, _ = weights_from_spans(ranges, [([fault], []) for _ in counted])
    oracle = (best[faulty].sum() / best.sum()) / (faulty.sum() / len(w)) if faulty.any() else 1.0
    ext = rec["extraction"]
    hit = {r for d in counted for e in d["evidence"] for r in _rules_of(e)
           if e["set"] == "dir" and _overlap(fault, [tuple(e["span"])])}
    blamed = {r for d in counted for e in d["evidence"] for r in _rules_of(e) if e["set"] == "dir"}
    context = {r for d in counted for e in d["evidence"] for r in _rules_of(e) if e["set"] == "ctx"}
    demoted = [e for d in counted for e in d["evidence"] if e.get("demoted_by")]
    return {"rules_hit": hit, "rules_blamed": blamed, "rules_context": context,
            "rules_demoted": {e["demoted_by"] for e in demoted},
            "rules_demoted_fault": {e["demoted_by"] for e in demoted
                                    if _overlap(fault, [tuple(e["span"])])},
            "hit_dir": _inside(fault, s_dir), "hit_all": _inside(fault, s_all),
            "precision": _overlap(fault, s_dir) / dir_chars if dir_chars else 0.0,
            "dir_share": dir_chars / max(1, ext["end"] - ext["start"]), "ratio": float(ratio),
            "oracle": float(oracle)}


def evaluate(mutants: list[dict], tasks: dict[str, Task], tok) -> list[list]:
    """Table rows: per fault kind, all, and all per seed (with several), per method, the
    means of ``measure``."""
    per: dict[tuple[str, str], list[dict]] = {}
    seeds = sorted({rec.get("seed", 0) for rec in mutants})
    # Both splits present (``--split all``): each reported apart as well, from the same mutants.
    both = len({held_out(rec["task_id"]) for rec in mutants}) > 1
    for rec in mutants:
        ranges = token_char_ranges(rec["response"], tok)
        groups = [rec["mutation"]["kind"], "ALL"]
        groups += [f"ALL seed {rec.get('seed', 0)}"] if len(seeds) > 1 else []
        groups += [f"ALL {'held-out' if held_out(rec['task_id']) else 'dev'}"] if both else []
        for method in BENCH_METHODS:
            m = measure(rec, tasks[rec["task_id"]], method, ranges)
            for group in groups:
                per.setdefault((group, method), []).append(m)
    rows = []
    for kind in [*FAULTS, *UNSEEN, "ALL", "ALL dev", "ALL held-out",
                 *(f"ALL seed {s}" for s in seeds)]:
        for method in [*ORDER, *(m for m in BENCH_METHODS if m not in ORDER)]:
            ms = per.get((kind, method))
            if not ms:
                continue
            mean = {k: statistics.fmean(float(m[k]) for m in ms) for k in ms[0]
                    if not k.startswith("rules_")}
            rows.append([kind, method, len(ms), f"{mean['hit_dir']:.0%}",
                         f"{mean['hit_all']:.0%}", f"{mean['precision']:.3f}",
                         f"{mean['dir_share']:.0%}", f"{mean['ratio']:.2f}x",
                         f"{mean['oracle']:.2f}x"])
    return rows


def rule_rows(mutants: list[dict], tasks: dict[str, Task], tok) -> list[list]:
    """Per rule (grounded): mutants where it blamed something directly, mutants where its
    direct blame overlaps the fault, mutants where it blamed context, mutants where it demoted
    blame to the context, and where what it demoted held the fault; and ALL's hit@dir,
    hit@dir+ctx and w-ratio with the rule switched off (ablation; the base row first)."""
    ranges = [token_char_ranges(rec["response"], tok) for rec in mutants]

    def run_all(rules: LocalizeConfig) -> list[dict]:
        return [measure(rec, tasks[rec["task_id"]], "grounded", r, rules)
                for rec, r in zip(mutants, ranges)]

    def summary(ms: list[dict]) -> list[str]:
        n = max(1, len(ms))
        return [f"{sum(m['hit_dir'] for m in ms) / n:.0%}",
                f"{sum(m['hit_all'] for m in ms) / n:.0%}",
                f"{statistics.fmean(m['ratio'] for m in ms) if ms else 0:.2f}x"]

    base = run_all(LocalizeConfig())
    rows = [["(all rules on)", "", "", "", "", "", *summary(base)]]
    used = sorted({r for m in base for r in m["rules_blamed"] | m["rules_demoted"]
                   | m["rules_context"]} - {""})
    for rule_id in used:
        counts = [sum(rule_id in m[k] for m in base) for k in
                  ("rules_blamed", "rules_hit", "rules_context", "rules_demoted",
                   "rules_demoted_fault")]
        rows.append([rule_id, *counts, *summary(run_all(LocalizeConfig({rule_id})))])
    return rows


def miss_lines(mutants: list[dict], tasks: dict[str, Task]) -> list[str]:
    """One block per development-split mutant whose fault ``grounded`` leaves outside S_dir:
    the fault's line, and each counted diagnostic's reason and direct spans with their rules.
    Held-out mutants are never listed: reading their misses would fit the rules to them."""
    out = []
    for rec in mutants:
        if held_out(rec["task_id"]):
            continue
        loc = localize_record(rec, "grounded", task=tasks[rec["task_id"]])
        counted = [d for d in loc["diagnostics"] if d.get("weighted")]
        fault = tuple(Mutation(**rec["mutation"]).fault)
        text = rec["response"]
        if _inside(fault, merge_spans(tuple(x) for d in counted for x in d["s_dir"])):
            continue
        in_ctx = _inside(fault, merge_spans(tuple(x) for d in counted for x in d["s_ctx"]))
        out.append(f"- {rec['task_id']} {rec['model']} seed {rec.get('seed', 0)}: "
                   f"{rec['mutation']['kind']} at line {text.count(chr(10), 0, fault[0]) + 1}"
                   f"{' (in S_ctx)' if in_ctx else ''}: {_line_at(text, fault[0])}")
        for d in counted:
            out.append(f"    {d.get('kind')} {d.get('reason')} {d.get('rubric_id') or ''}")
            for e in d["evidence"]:
                if e["set"] == "dir":
                    out.append(f"      dir by {', '.join(_rules_of(e))}: "
                               f"{_line_at(text, e['span'][0])}")
    return out


def _line_at(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start:end if end >= 0 else len(text)].strip()[:120]


# The scored combiner's settings tried by --rank-grid (``LocalizeConfig.rank_*``).
RANK_GRID = {"rank_budget": (0.03, 0.05, 0.1), "rank_ctx_weight": (0.2, 0.4, 0.7),
             "spectrum": (0.0, 1.0, 2.0)}


def rank_rows(mutants: list[dict], tasks: dict[str, Task], tok) -> list[list]:
    """The ``ranked`` method under each setting of ``RANK_GRID``: hit@dir, hit@dir+ctx and
    dir% on the development and the held-out split. The setting is chosen on the development
    split alone (most hits at both levels, S_dir under 10% of the app); its held-out figures
    are the ones to quote (marked ``*``)."""
    import itertools

    ranges = [token_char_ranges(rec["response"], tok) for rec in mutants]
    base = dict(LocalizeConfig().rank_weights)
    rows, best = [], None
    for budget, ctx, spec in itertools.product(*RANK_GRID.values()):
        rules = LocalizeConfig(rank_budget=budget, rank_ctx_weight=ctx,
                               rank_weights=tuple({**base, "spectrum": spec}.items()))
        split: dict[str, list[dict]] = {"dev": [], "held-out": []}
        for rec, r in zip(mutants, ranges):
            m = measure(rec, tasks[rec["task_id"]], "ranked", r, rules)
            split["held-out" if held_out(rec["task_id"]) else "dev"].append(m)
        cells = []
        for ms in split.values():
            n = max(1, len(ms))
            cells += [sum(m["hit_dir"] for m in ms) / n, sum(m["hit_all"] for m in ms) / n,
                      statistics.fmean(m["dir_share"] for m in ms) if ms else 0.0]
        rows.append([budget, ctx, spec, *cells])
        if cells[2] < 0.10 and (best is None or cells[0] + cells[1] > best[3] + best[4]):
            best = rows[-1]
    return [[("*" if r is best else ""), *r[:3], *(f"{v:.0%}" for v in r[3:])] for r in rows]


def speed(records: list[dict], tasks: dict[str, Task], tok,
          method: str = "grounded") -> tuple[float, float, int]:
    """Median CPU ms of localize + weights per record: all, and those of 15-25 KB. Each
    record's time is the least of three runs after a warm one: one run of a 20 KB record
    varied by half between two runs of the benchmark."""
    times = []
    for rec in records:
        localize_record(rec, method, tokenizer=tok, task=tasks[rec["task_id"]])  # warm caches
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            localize_record(rec, method, tokenizer=tok, task=tasks[rec["task_id"]])
            best = min(best, time.process_time() - t0)
        times.append((len(rec["response"]), best * 1000))
    sized = [t for n, t in times if 15_000 <= n <= 25_000]
    return (statistics.median(t for _, t in times) if times else float("nan"),
            statistics.median(sized) if sized else float("nan"), len(sized))


def chosen_tasks(tasks: dict[str, Task], cfg: BenchConfig) -> set[str]:
    """The ids of the tasks the benchmark reads: the first ``cfg.tasks`` in file order, less
    the first ``cfg.skip_tasks``."""
    return set(list(tasks)[cfg.skip_tasks:cfg.tasks])


def run(cfg: BenchConfig) -> None:
    t0 = time.perf_counter()
    tasks = load_tasks(DATA / "tasks.jsonl")
    first = chosen_tasks(tasks, cfg)
    rows = [r for m in cfg.models for r in load_responses(DATA / "answers" / f"{m}.jsonl", tasks)
            if r["task_id"] in first]
    originals, drawn = split_mutants(score_cached(rows, tasks, cfg, fresh=cfg.fresh), cfg)
    passing = [r for r in originals if all_pass(r)]
    print(f"{len(passing)} of {len(originals)} answers pass every probe", file=sys.stderr)
    mutants = score_cached(drawn, tasks, cfg, fresh=cfg.fresh or cfg.fresh_mutants)
    drawn_n = len(mutants)
    mutants = distinct(mutants)
    kept = [m for m in mutants if caught(m)]
    hangs = sum(1 for m in mutants if not all_pass(m) and not caught(m))
    caught_n = len(kept)
    if cfg.recheck:
        kept = reproduced(kept, originals, tasks, cfg)
    tok = train_tokenizer([r["response"] for r in originals])
    rows = evaluate(kept, tasks, tok)
    print(f"\nLocalization on injected faults: {len(passing)} passing answers of "
          f"{', '.join(cfg.models)} (tasks {cfg.skip_tasks + 1}-{cfg.tasks}), {len(mutants)} "
          f"distinct mutants "
          f"({drawn_n - len(mutants)} more drawn again by a later seed, counted once), "
          f"{caught_n} caught by a probe ({hangs} caught only by hangs/time-outs, dropped)"
          + (f", {len(kept)} of them caught again on a second scoring (counted)"
             if cfg.recheck else "") + "\n")
    print(table(["fault", "method", "n", "hit@dir", "hit@dir+ctx", "prec", "dir%", "w-ratio",
                 "w-oracle"], rows))
    by_kind = {}
    for m in mutants:
        k = m["mutation"]["kind"]
        by_kind.setdefault(k, [0, 0])[0] += 1
        by_kind[k][1] += caught(m)
    print("\nmutants caught / made: " + ", ".join(f"{k} {c}/{n}" for k, (n, c) in
                                                  by_kind.items()))
    if cfg.rules:
        print("\nPer rule (grounded, ALL): mutants it blamed directly, mutants whose fault its "
              "direct blame overlaps, mutants where it blamed context, mutants where it demoted "
              "blame (and the fault with it), and the figures with it switched off\n")
        print(table(["rule", "blamed", "hits", "context", "demoted", "demoted fault",
                     "hit@dir off", "hit@dir+ctx off", "w-ratio off"],
                    rule_rows(kept, tasks, tok)))
    if cfg.rank_grid:
        print("\nThe scored combiner (ranked) per setting; * = chosen on dev (its held-out "
              "figures are the ones to quote)\n")
        print(table(["", "budget", "ctx weight", "spectrum", "dev hit@dir", "dev hit@dir+ctx",
                     "dev dir%", "held-out hit@dir", "held-out hit@dir+ctx", "held-out dir%"],
                    rank_rows(kept, tasks, tok)))
    if cfg.misses:
        print("\nMisses of grounded on the development split\n")
        print("\n".join(miss_lines(kept, tasks)) or "(none)")
    for method in ("grounded", "ranked"):
        med, med20, n20 = speed(kept, tasks, tok, method)
        print(f"speed ({method}, CPU time): median {med:.1f} ms per record, {med20:.1f} ms for "
              f"the {n20} records of 15-25 KB")
    print(f"total {time.perf_counter() - t0:.0f} s")


def main() -> None:
    global CACHE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(BenchConfig.models))
    ap.add_argument("--tasks", type=int, default=BenchConfig.tasks)
    ap.add_argument("--skip-tasks", type=int, default=BenchConfig.skip_tasks,
                    help="leave out the first N of the --tasks (disjoint from --tasks N)")
    ap.add_argument("--per-kind", type=int, default=BenchConfig.per_kind)
    ap.add_argument("--limit", type=int, default=None, help="at most N mutants per seed")
    ap.add_argument("--pages", type=int, default=BenchConfig.pages)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--fresh", action="store_true", help="ignore the score cache")
    ap.add_argument("--fresh-mutants", action="store_true",
                    help="score the mutants again, keep the cached originals")
    ap.add_argument("--no-rules", action="store_true",
                    help="skip the per-rule hit and ablation table")
    ap.add_argument("--faults", choices=sorted(KINDS), default=BenchConfig.faults,
                    help="fault kinds: the six the rules were written on, eight unseen, all")
    ap.add_argument("--split", choices=SPLITS, default=BenchConfig.split,
                    help="tasks: the development split, the held-out split (faults.held_out)")
    ap.add_argument("--rank-grid", action="store_true",
                    help="the ranked method under each setting of RANK_GRID, chosen on dev")
    ap.add_argument("--cache", type=Path, default=CACHE,
                    help="folder of the score cache (scored.jsonl); one outside the checkout "
                         "outlives it")
    ap.add_argument("--kinds", nargs="+", default=None,
                    help="only these fault kinds of --faults (every site with a large --per-kind)")
    ap.add_argument("--exclude-seeds", type=int, nargs="+", default=[],
                    help="leave out, unscored, the mutants these seeds draw (a later seed alone)")
    ap.add_argument("--misses", action="store_true",
                    help="list grounded's misses on the development split (never held-out)")
    ap.add_argument("--recheck", action="store_true",
                    help="count a caught mutant only when its failure comes back on a second "
                         "scoring and its original passes that again")
    a = ap.parse_args()
    if a.rank_grid and a.split != "all":
        ap.error("--rank-grid chooses on the development split and reports the held-out one: "
                 "it needs --split all")
    unknown = sorted(set(a.kinds or ()) - set(KINDS[a.faults]))
    if unknown:
        ap.error(f"--kinds {' '.join(unknown)}: not a kind of --faults {a.faults} "
                 f"({', '.join(KINDS[a.faults])})")
    if set(a.exclude_seeds) & set(a.seeds):
        ap.error("--exclude-seeds must not repeat a seed of --seeds")
    CACHE = a.cache
    if not 0 <= a.skip_tasks < a.tasks:
        ap.error(f"--skip-tasks {a.skip_tasks} must be at least 0 and under --tasks {a.tasks}")
    run(BenchConfig(tuple(a.models), a.tasks, a.skip_tasks, a.per_kind, a.limit, a.pages,
                    tuple(a.seeds), a.fresh, a.fresh_mutants, not a.no_rules, a.faults, a.split,
                    a.rank_grid, a.misses, tuple(a.kinds) if a.kinds else None,
                    tuple(a.exclude_seeds), a.recheck))


if __name__ == "__main__":
    main()
