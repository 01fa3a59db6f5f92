"""Localizes a scored record: spans per diagnostic, then per-token base weights.

``localize_record`` builds the code graph once per record, localizes every localizable
diagnostic (``spans.localize``) and, given the policy's tokenizer, turns the spans of the
diagnostics that cost the response reward into ``weights.base_weights`` over the sampled
tokens. The advantage-sign step (``rcca_jax.rl.loss.token_weights``) is the trainer's: it
needs the group's advantages, which a record does not have.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from evaluators.contract import read_record
from evaluators.localize.corroborate import corroborate
from evaluators.localize.graph import build_graph, find_html_region
from evaluators.localize.rules import LocalizeConfig
from evaluators.localize.spans import LOCALIZED_KINDS, SPECTRUM_METHODS, Localization, localize
from evaluators.localize.tokens import span_mask, token_char_ranges
from evaluators.localize.weights import WeightConfig, base_weights

Span = tuple[int, int]


def counts_for_weights(record: dict, diagnostic: dict) -> bool:
    """Whether a diagnostic explains lost reward, so that its spans weigh tokens.

    Counted: a severe syntax error (gate S), load-time failures and exceptions (gate E), a
    failed rubric's probe failure, exceptions and judge findings, and exceptions that failed
    gate E through a core rubric. Never: info kinds, minor (CSS) syntax errors, exceptions in passing rubrics.
    """
    kind = diagnostic.get("kind")
    if kind not in LOCALIZED_KINDS or diagnostic.get("severity") == "info":
        return False
    if kind == "syntax_error":
        return diagnostic.get("severity") == "severe"
    if kind in ("runtime_failure", "no_app"):
        return True
    if kind == "page_error" and diagnostic.get("stage") == "runtime":
        return True
    verdict = next((r for r in record.get("rubrics") or ()
                    if r.get("id") == diagnostic.get("rubric_id")), None)
    if verdict is None:
        return False
    if verdict.get("verdict") == "fail":
        return True
    return kind == "page_error" and bool(verdict.get("runtime_error")) and (
        record.get("gate") == "runtime")


def _probes(task) -> dict:
    """{rubric id: probe} of a ``tasks.Task`` or a task dict; {} for None."""
    if task is None:
        return {}
    rubrics = task.get("rubrics", ()) if isinstance(task, dict) else task.rubrics
    out = {}
    for r in rubrics:
        rid, probe = (r.get("id"), r.get("probe")) if isinstance(r, dict) else (r.id, r.probe)
        out[rid] = probe
    return out


def _meta(task) -> dict:
    """A ``tasks.Task``'s or task dict's ``meta`` ({} for None)."""
    meta = task.get("meta") if isinstance(task, dict) else getattr(task, "meta", None)
    return meta if isinstance(meta, dict) else {}


def _region(record: dict) -> Span:
    ext = record.get("extraction")
    response = record.get("response") or ""
    if isinstance(ext, dict) and ext.get("start") is not None:
        return int(ext["start"]), int(ext.get("end", len(response)))
    return find_html_region(response)


def localize_diagnostics(record: dict, method: str = "grounded", task=None,
                         rules: LocalizeConfig = LocalizeConfig()) -> list[dict]:
    """The record's diagnostics, each localizable one with ``s_dir``, ``s_ctx``,
    ``evidence`` and ``weighted`` (``counts_for_weights``) added (copies; the record is
    not changed)."""
    record = read_record(record)
    diagnostics = [dict(d) for d in record.get("diagnostics") or ()]
    todo = [d for d in diagnostics if d.get("kind") in LOCALIZED_KINDS]
    if not todo:
        return diagnostics
    response = record.get("response") or ""
    graph = build_graph(response, _region(record)) if record.get("extraction") else None
    probes = _probes(task)
    # Inputs only one method reads, gathered only for it.
    spectrum = _spectrum(record, diagnostics) if method in SPECTRUM_METHODS else None
    bug = _meta(task).get("sft_bug") if method == "oracle" else None
    for d in todo:
        seen = _with_probe_coverage(d, diagnostics)
        # What the localizer reads beside the diagnostic; never stored in the record.
        if spectrum is not None and d.get("kind") == "probe_failure":
            seen = {**seen, "spectrum": spectrum}
        if bug is not None:
            seen = {**seen, "sft_bug": bug}
        loc = (localize(graph, seen, method, probes.get(d.get("rubric_id")), rules)
               if graph is not None else Localization())
        d.update(loc.fields())
        d["weighted"] = counts_for_weights(record, d)
    corroborate(diagnostics, rules.disabled_rules)
    _blame_load_exceptions(diagnostics)
    return diagnostics


def _spectrum(record: dict, diagnostics: list[dict]) -> dict | None:
    """The paths of the record's probes by outcome (`localize.spectrum`): failed rubrics'
    probe failures and passing rubrics' verdicts with coverage; None without a passing one."""
    passing = [v["coverage"] for v in record.get("rubrics") or ()
               if v.get("verdict") == "pass" and isinstance(v.get("coverage"), dict)]
    if not passing:
        return None
    failed = {v.get("id") for v in record.get("rubrics") or () if v.get("verdict") == "fail"}
    failing = [d["coverage"] for d in diagnostics if d.get("kind") == "probe_failure"
               and d.get("rubric_id") in failed and isinstance(d.get("coverage"), dict)]
    return {"failing": failing, "passing": passing}


def _with_probe_coverage(d: dict, diagnostics: list[dict]) -> dict:
    """An exception raised by a probe, with the coverage its rubric's failure recorded.

    The evaluator reads coverage once per failed probe and stores it on the probe_failure;
    the probe's exceptions ran on the same path, and a throw without a stack needs it.
    """
    if d.get("kind") != "page_error" or d.get("coverage") or d.get("rubric_id") is None:
        return d
    cov = next((x.get("coverage") for x in diagnostics if x.get("kind") == "probe_failure"
                and x.get("rubric_id") == d["rubric_id"] and x.get("coverage")), None)
    return d if cov is None else {**d, "coverage": cov}


def _blame_load_exceptions(diagnostics: list[dict]) -> None:
    """Gives a load gate failed by an exception the spans of that exception.

    A gate failure with reason ``uncaught_at_load`` names the page_error that caused it
    (``caused_by``); that exception's code is what cost the reward, so the gate failure
    blames it too.
    """
    for d in diagnostics:
        cause = d.get("caused_by")
        source = diagnostics[cause] if isinstance(cause, int) and 0 <= cause < len(
            diagnostics) else None
        if (d.get("kind") == "runtime_failure" and d.get("reason") == "uncaught_at_load"
                and source is not None and source.get("kind") == "page_error"
                and "s_dir" in source):
            d["s_dir"] = [list(s) for s in source["s_dir"]]
            d["s_ctx"] = [list(s) for s in source["s_ctx"]]
            d["evidence"] = [{**e, "why": "the load failed on this exception: " + e["why"]}
                             for e in source["evidence"]]


def weights_from_spans(ranges: np.ndarray, spans: Sequence[tuple[Sequence, Sequence]],
                       cfg: WeightConfig = WeightConfig()) -> tuple[np.ndarray, np.ndarray]:
    """``base_weights`` of tokens from per-diagnostic ``(s_dir, s_ctx)`` character spans.

    Args:
        ranges: int [T, 2], ``tokens.token_char_ranges`` of the response.
        spans: One ``(s_dir, s_ctx)`` per counted diagnostic, spans as pairs.
        cfg: The weights.

    Returns:
        (w float32 [T], diagnosed bool [T]).
    """
    masks = [(span_mask(ranges, np.asarray(list(d), dtype=np.int64).reshape(-1, 2)),
              span_mask(ranges, np.asarray(list(c), dtype=np.int64).reshape(-1, 2)))
             for d, c in spans]
    return base_weights(len(ranges), masks, cfg)


def localize_record(record: dict, method: str = "grounded", tokenizer=None,
                    token_ids: Sequence[int] | None = None, cfg: WeightConfig = WeightConfig(),
                    task=None, rules: LocalizeConfig = LocalizeConfig()) -> dict:
    """Localizes a scored record and, with a tokenizer, weighs its tokens.

    Args:
        record: An evaluator output record (``response``, ``diagnostics``, ``extraction``,
            ``rubrics``; optionally ``token_ids``).
        method: ``text``, ``grounded``, ``ranked``, ``naive``, ``sbfl`` or ``oracle``
            (``spans.METHODS``).
        tokenizer: A byte-level BPE fast tokenizer; None skips the weights.
        token_ids: The sampled ids [T]; default the record's ``token_ids``, else the
            tokenizer's encoding of the response.
        cfg: The weights.
        task: The record's ``tasks.Task`` (or task dict), optional: its probes let a failed
            ``assert`` step be traced to the elements it compared.
        rules: Which localization rules are switched off (``rules.LocalizeConfig``).

    Returns:
        A shallow copy of the record whose localizable diagnostics carry ``s_dir``, ``s_ctx``
        (lists of ``[start, end]`` response offsets), ``evidence`` and ``weighted``, plus
        ``localization`` ({"method"}) and, with a tokenizer, ``weights_base`` (list of float,
        one per token) and ``diagnosed`` (list of bool).

    Raises:
        KeyError: unknown method. ValueError: the tokens do not decode to the response.
    """
    out = dict(record)
    out["diagnostics"] = localize_diagnostics(record, method, task, rules)
    out["localization"] = {"method": method}
    if tokenizer is not None:
        ids = token_ids if token_ids is not None else record.get("token_ids")
        ranges = token_char_ranges(record.get("response") or "", tokenizer, ids)
        counted = [(d["s_dir"], d["s_ctx"]) for d in out["diagnostics"] if d.get("weighted")]
        w, diagnosed = weights_from_spans(ranges, counted, cfg)
        out["weights_base"] = w.tolist()
        out["diagnosed"] = diagnosed.tolist()
    return out


@dataclasses.dataclass(frozen=True)
class Localizer:
    """What an evaluator worker needs to localize the records it scores (picklable).

    The trainer hands one to the fleet at start; each row that asks for it (``token_ids``,
    the sampled ids) comes back localized by the worker that scored it, in parallel with the
    other workers, with ``weights_base`` and ``diagnosed`` over those ids. The advantage-sign
    step stays the trainer's (``rcca_jax.rl.loss.token_weights``).
    """

    tokenizer: Any
    method: str = "grounded"
    weights: WeightConfig = WeightConfig()
    rules: LocalizeConfig = LocalizeConfig()

    def __call__(self, record: dict, token_ids: Sequence[int], task=None) -> dict:
        """The localized record; a record that cannot be (tokens that do not decode to its
        response) comes back unchanged with ``localization.error`` set."""
        if record.get("status") != "ok" or record.get("reward") is None:
            return record
        try:
            return localize_record(record, self.method, self.tokenizer, token_ids, self.weights,
                                   task, self.rules)
        except Exception as e:  # noqa: BLE001 - the localizer's failure, never the model's
            return {**record, "localization": {"method": self.method,
                                               "error": f"{type(e).__name__}: {e}"[:500]}}


def localize_in_worker(localizer: "Localizer | None", row: dict, record: dict, task) -> dict:
    """An evaluator worker's step after scoring ``row``: localizes when the row asks."""
    ids = row.get("token_ids")
    if localizer is None or ids is None:
        return record
    record = {k: v for k, v in record.items() if k != "token_ids"}
    return localizer(record, ids, task)
