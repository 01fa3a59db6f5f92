"""Validation by execution: what of a draft becomes a task, and why the rest does not.

Checks, in order (each dropped draft or probe names the first that failed; `CHECKS`):

1. `format`: the task it makes is in the task format (`Draft.check`; unreadable model
   output is counted as `unparseable` before this).
2. `duplicate`: its request is a near-duplicate of an earlier kept one: Jaccard similarity of
   lower-cased word 3-grams at least `duplicate_similarity` (0.8).
3. `reference`: the reference app, scored `runs` times (3) with every probe run, loads with
   no gate failure and passes every probe in every run; a probe whose verdict changes across
   the runs is `flaky` (the rubric stays, judge-only), one that fails in every run, or is
   malformed, drops the draft (a reference that fails its own rubric is not a reference).
4. `robust`: each probe passes on a semantics-preserving rewrite of the reference (its own
   names renamed, its function declarations reordered: `synth.rewrite`); one that fails
   tests how the code is written, and its rubric becomes judge-only.
5. `discriminates`: each probe fails on at least one single-fault mutant of the reference
   (`synth.faults`: the script faults of the localization benchmark and the markup faults,
   one site per kind, up to `mutants`, scored in rounds of `mutant_rounds`: the first round
   with every probe, each later one only with the probes no earlier mutant failed, since one
   failure is all the check needs); one that never fails tests nothing, and its rubric
   becomes judge-only.
6. `probes_left`: a task keeps at least one probe; otherwise it is dropped.

An evaluator failure on any of these rows (`status: error`) is never held against a draft:
the draft is counted under `evaluator_error` and not kept.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import random
from typing import Iterable

from evaluators.config import EvalConfig
from evaluators.synth.draft import Draft, DraftError, shingles, similarity
from evaluators.synth.faults import FAULTS, MARKUP, UNSEEN
from evaluators.synth.rewrite import rewrite
from evaluators.tasks import parse_task

CHECKS = ("unparseable", "format", "duplicate", "evaluator_error", "reference",
          "probes_left")
PROBE_CHECKS = ("flaky", "robust", "discriminates")


@dataclasses.dataclass(frozen=True)
class ValidateConfig:
    """Attributes:
      runs: times the reference is scored (flakiness).
      mutants: most single-fault mutants per draft.
      mutant_rounds: mutants each round adds (check 5); the first round runs every probe,
        later ones only the probes still undecided. Most probes fail on one of the first two
        mutants, so small first rounds save most of the page loads; the last round takes
        whatever is left up to `mutants`.
      duplicate_similarity: requests at least this similar are duplicates.
      seed: mutant choice.
    """

    runs: int = 3
    mutants: int = 16
    mutant_rounds: tuple[int, ...] = (2, 4)
    duplicate_similarity: float = 0.8
    seed: int = 0

    def __post_init__(self):
        if not self.mutant_rounds or any(int(n) < 1 for n in self.mutant_rounds):
            raise ValueError(f"ValidateConfig.mutant_rounds must be positive counts, got "
                             f"{self.mutant_rounds!r}")


@dataclasses.dataclass
class Outcome:
    """Everything validation decided: kept tasks, their references, and the report."""

    tasks: list[dict] = dataclasses.field(default_factory=list)
    references: list[dict] = dataclasses.field(default_factory=list)
    dropped: list[dict] = dataclasses.field(default_factory=list)  # {id, check, why, domain, kind}
    judge_only: list[dict] = dataclasses.field(default_factory=list)  # {id, rubric, check, why}

    def report(self) -> dict:
        """Counts kept and dropped at each check, overall and per domain and kind."""
        by = collections.Counter(d["check"] for d in self.dropped)
        probes = collections.Counter(j["check"] for j in self.judge_only)
        groups: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for t in self.tasks:
            groups[f"{t['meta']['domain']} / {t['meta']['kind']}"]["kept"] += 1
        for d in self.dropped:
            groups[f"{d['domain']} / {d['kind']}"][d["check"]] += 1
        kept_probes = sum(r.get("probe") is not None for t in self.tasks for r in t["rubrics"])
        return {"drafts": len(self.tasks) + len(self.dropped), "kept": len(self.tasks),
                "dropped": {c: by[c] for c in CHECKS if by[c]},
                "probes_kept": kept_probes,
                "probes_judge_only": {c: probes[c] for c in PROBE_CHECKS if probes[c]},
                "groups": {k: dict(v) for k, v in sorted(groups.items())}}


def _mutants(draft: Draft, cfg: ValidateConfig) -> list[str]:
    """Single-fault mutants of the reference: one site of each fault kind (kinds in a seeded
    order), up to cfg.mutants."""
    from evaluators.localize.graph import build_graph

    rng = random.Random(f"{cfg.seed}:{draft.id}")
    g = build_graph(draft.reference)
    kinds = [*FAULTS.values(), *UNSEEN.values(), *MARKUP.values()]
    rng.shuffle(kinds)
    out = []
    for sites in kinds:
        found = sites(g, rng)
        if found:
            m = rng.choice(found).apply(draft.reference)
            if m != draft.reference and m not in out:
                out.append(m)
    return out[:cfg.mutants]


def _rows(draft: Draft, mutants: list[str], cfg: ValidateConfig) -> list[dict]:
    rows = [{"task_id": draft.id, "role": "reference", "response": draft.reference}
            for _ in range(cfg.runs)]
    rewritten = rewrite(draft.reference)
    if rewritten is not None:
        rows.append({"task_id": draft.id, "role": "rewrite", "response": rewritten})
    rows += [{"task_id": draft.id, "role": "mutant", "response": m}
             for m in mutants[:cfg.mutant_rounds[0]]]
    return rows


def screen(drafts: Iterable[Draft | DraftError], cfg: ValidateConfig, out: Outcome,
           seen: list | None = None) -> list[Draft]:
    """Checks 1-2 (no browser): the drafts left to run, in order; the rest go to `out.dropped`.

    `seen` holds (shingles, id) of earlier survivors (extended here), for later rounds.
    """
    kept: list[Draft] = []
    seen = [] if seen is None else seen
    for d in drafts:
        if isinstance(d, DraftError):
            out.dropped.append({"id": d.draft_id, "check": "unparseable", "why": str(d),
                                "domain": d.domain, "kind": d.kind})
            continue
        try:
            d.check()
        except DraftError as e:
            out.dropped.append(_drop(d, "format", str(e)))
            continue
        sh = shingles(d.request)
        twin = next((tid for s, tid in seen if similarity(sh, s) >= cfg.duplicate_similarity), None)
        if twin is not None:
            out.dropped.append(_drop(d, "duplicate", f"near-duplicate of {twin}"))
            continue
        seen.append((sh, d.id))
        kept.append(d)
    return kept


def _drop(d: Draft, check: str, why: str) -> dict:
    return {"id": d.id, "check": check, "why": why, "domain": d.domain, "kind": d.kind}


def validate(drafts: Iterable[Draft | DraftError], eval_cfg: EvalConfig | None = None,
             cfg: ValidateConfig = ValidateConfig(), workers: int = 1) -> Outcome:
    """Runs every check; returns the kept tasks (probes that failed a probe check removed,
    their rubrics judge-only), their reference responses and the report."""
    out = Outcome()
    run_checks(screen(drafts, cfg, out), eval_cfg, cfg, workers, out)
    return out


def run_checks(todo: list[Draft], eval_cfg: EvalConfig | None, cfg: ValidateConfig,
               workers: int, out: Outcome) -> None:
    """Checks 3-6 on screened drafts, all their rows scored in one batch; results into `out`."""
    if not todo:
        return
    eval_cfg = dataclasses.replace(eval_cfg or EvalConfig(), run_rubrics_after_gate_failure=True)
    mutants = {d.id: _mutants(d, cfg) for d in todo}
    tasks = {d.id: parse_task(d.task()) for d in todo}
    rows = [r for d in todo for r in _rows(d, mutants[d.id], cfg)]
    records: dict[str, list[tuple[str, dict]]] = collections.defaultdict(list)
    _score(rows, tasks, eval_cfg, workers, records)
    # Later rounds: the next mutants, only for the probes no mutant failed so far, as tasks
    # of their own holding just those rubrics (a probe is scored no more than it must be).
    bounds = [*itertools.accumulate(cfg.mutant_rounds)]
    bounds = [b for b in bounds if b < cfg.mutants] + [cfg.mutants]
    for r, (lo, hi) in enumerate(zip(bounds, bounds[1:]), start=1):
        more, rest = {}, []
        for d in todo:
            open_ids = _undecided(d, records[d.id])
            if open_ids and len(mutants[d.id]) > lo:
                sub = dataclasses.replace(d, id=f"{d.id}#round{r}", rubrics=tuple(
                    x for x in d.rubrics if x["id"] in open_ids))
                more[sub.id] = parse_task(sub.task())
                rest += [{"task_id": sub.id, "role": "mutant", "response": m, "of": d.id}
                         for m in mutants[d.id][lo:hi]]
        if not rest:
            break
        _score(rest, more, eval_cfg, workers, records)
    for d in todo:
        decide(d, records[d.id], cfg, out)


def _score(rows: list[dict], tasks: dict, eval_cfg: EvalConfig, workers: int,
           records: dict[str, list[tuple[str, dict]]]) -> None:
    from evaluators.fleet.pool import EvaluatorPool

    for row, rec in zip(rows, EvaluatorPool(tasks, eval_cfg, workers=workers).score(rows)):
        records[row.get("of", row["task_id"])].append((row["role"], rec))


def _undecided(d: Draft, scored: list[tuple[str, dict]]) -> set[str]:
    """Probed rubrics the reference passes and no mutant scored so far failed."""
    if any(rec["status"] != "ok" for _, rec in scored):
        return set()
    refs = [_verdicts(rec) for role, rec in scored if role == "reference"]
    mutants = [_verdicts(rec) for role, rec in scored if role == "mutant"]
    return {r["id"] for r in d.rubrics if r.get("probe") is not None
            and all(v.get(r["id"]) == "pass" for v in refs)
            and not any(m.get(r["id"]) == "fail" for m in mutants)}


def _verdicts(rec: dict) -> dict[str, str]:
    return {v["id"]: v["verdict"] for v in rec["rubrics"]}


def decide(d: Draft, scored: list[tuple[str, dict]], cfg: ValidateConfig, out: Outcome) -> None:
    """Checks 3-6 for one draft from its scored rows ((role, record) pairs)."""
    if any(rec["status"] != "ok" for _, rec in scored):
        bad = next(rec for _, rec in scored if rec["status"] != "ok")
        out.dropped.append(_drop(d, "evaluator_error", str(bad.get("error", ""))[:300]))
        return
    refs = [rec for role, rec in scored if role == "reference"]
    gates = sorted({rec["gate"] for rec in refs if rec["gate"] is not None})
    if gates:
        out.dropped.append(_drop(d, "reference", f"the reference fails gate {', '.join(gates)}"))
        return
    probed = [r for r in d.rubrics if r.get("probe") is not None]
    runs = {r["id"]: [_verdicts(rec)[r["id"]] for rec in refs] for r in probed}
    for rid, vs in runs.items():
        if "error" in vs or all(v != "pass" for v in vs):
            message = next((v.get("message") for v in refs[0]["rubrics"] if v["id"] == rid), "")
            out.dropped.append(_drop(d, "reference", f"the reference fails rubric {rid}: {message}"))
            return
    rewrites = [_verdicts(rec) for role, rec in scored if role == "rewrite"]
    mutants = [_verdicts(rec) for role, rec in scored if role == "mutant"]
    rubrics, stats = [], {}
    for r in d.rubrics:
        if r.get("probe") is None:
            rubrics.append(r)
            continue
        rid = r["id"]
        caught = sum(m.get(rid) == "fail" for m in mutants)
        tried = sum(rid in m for m in mutants)
        robust = all(w.get(rid) == "pass" for w in rewrites)
        stats[rid] = {"reference_runs": runs[rid], "mutants": tried, "mutants_failed": caught,
                      "rewrite": None if not rewrites else ("pass" if robust else "fail")}
        check, why = None, ""
        if len(set(runs[rid])) > 1:
            check, why = "flaky", f"verdicts over {cfg.runs} runs of the reference: {runs[rid]}"
        elif not robust:
            check, why = "robust", "fails on a semantics-preserving rewrite of the reference"
        elif caught == 0:
            check, why = "discriminates", f"passes on all {tried} mutants of the reference"
        if check is None:
            rubrics.append(r)
        else:
            out.judge_only.append({"id": d.id, "rubric": rid, "check": check, "why": why})
            rubrics.append({**r, "probe": None, "meta": {**r.get("meta", {}), "probe_dropped": why}})
    if not any(r.get("probe") is not None for r in rubrics):
        out.dropped.append(_drop(d, "probes_left", "no probe passed every check"))
        return
    task = dataclasses.replace(d, rubrics=tuple(rubrics)).task(
        {"validation": {"runs": cfg.runs, "rewrite": bool(rewrites), "rubrics": stats}})
    out.tasks.append(task)
    out.references.append({"task_id": d.id, "model": "reference", "response": d.reference})
