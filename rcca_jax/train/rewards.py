"""Rollouts -> the evaluator fleet -> rewards, validity and per-token base weights.

Runs on the host (CPU): decodes sampled ids to response text and hands text and
ids to the evaluator fleet, whose workers score them (real Chromium, JS coverage
on failing probes), localize the diagnostics and turn them into `weights_base`
and `diagnosed` over the *sampled* ids (`evaluators.localize.api.Localizer`);
the host only gathers them. An evaluator error is never the model's fault: such
rows come back with `valid=False` and are masked by the trainer.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import numpy as np

from evaluators.config import EvalConfig
from evaluators.localize.api import Localizer
from evaluators.localize.spans import SPECTRUM_METHODS
from evaluators.localize.tokens import token_bytes
from evaluators.fleet.pool import EvaluatorPool
from rcca_jax.train.config import EvaluatorConfig


@dataclasses.dataclass
class Scored:
    """Per-rollout results, aligned with the rollout rows."""

    rewards: np.ndarray          # f32 [N]
    valid: np.ndarray            # bool [N]; False: evaluation error
    weights_base: list[np.ndarray]  # f32 [L_i] per rollout (response ids, EOS excluded)
    diagnosed: list[np.ndarray]     # bool [L_i]
    records: list[dict]
    seconds: float               # submit -> records collected (for a concatenation: the longest)
    align_errors: int
    wait_seconds: float = 0.0    # how long `collect` blocked the caller
    queue_depth: int = 0         # rows pending in the fleet when this part was submitted

    @staticmethod
    def concat(parts: Sequence["Scored"]) -> "Scored":
        return Scored(
            np.concatenate([p.rewards for p in parts]), np.concatenate([p.valid for p in parts]),
            [w for p in parts for w in p.weights_base], [d for p in parts for d in p.diagnosed],
            [r for p in parts for r in p.records], max(p.seconds for p in parts),
            sum(p.align_errors for p in parts), sum(p.wait_seconds for p in parts),
            max(p.queue_depth for p in parts))


@dataclasses.dataclass
class Pending:
    """A submitted part: what `Fleet.collect` needs to finish it."""

    response_ids: list[list[int]]
    aligned: list[bool]
    handle: object
    submitted: float
    queue_depth: int
    localize: bool = True
    # Row i's record is the fleet's record `shared[i]`: identical rows are scored once.
    shared: list[int] | None = None


def response_text(tokenizer, ids: Sequence[int]) -> tuple[str, bool]:
    """The exact text of sampled ids (their bytes, concatenated); False if not valid UTF-8."""
    data = b"".join(token_bytes(tokenizer, list(ids)))
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def eval_config(cfg: EvaluatorConfig, method: str | None = None) -> EvalConfig:
    """The evaluator's config for the run: `cfg.scoring`, with JS coverage on (localization
    grounds blame in what ran; passing probes' paths too for the methods that read the spectrum) and at most
    `pages_per_worker` pages admitted regardless."""
    b = cfg.scoring.browser
    browser = dataclasses.replace(b, min_pages=min(b.min_pages, b.pages_per_worker), coverage=True,
                                  coverage_passing=b.coverage_passing or method in SPECTRUM_METHODS)
    return dataclasses.replace(cfg.scoring, browser=browser)


def _pass_rate(rec: dict) -> float:
    """Plain GRPO's reward: the share of judged rubrics that pass (no gates, no severities)."""
    judged = [r for r in rec.get("rubrics") or () if r.get("verdict") in ("pass", "fail")]
    return sum(r["verdict"] == "pass" for r in judged) / len(judged) if judged else 0.0


REWARDS = {"gated": lambda rec: float(rec["reward"]), "pass_rate": _pass_rate}


class Fleet:
    """Scores rollouts, streamed: `submit` a group as soon as it is sampled, `collect` it later.

    Backends differ only in how rows reach the browsers (`_submit`, `_collect`,
    `_depth`); decoding and rewards are shared, and every backend's workers localize
    with `self.localizer`. ``method`` None skips localization (every weight 1,
    nothing diagnosed).
    """

    def __init__(self, tasks: dict, cfg: EvaluatorConfig, tokenizer, method: str | None = "grounded",
                 reward: str = "gated"):
        self.tasks, self.cfg, self.tokenizer, self.method = tasks, cfg, tokenizer, method
        self.reward_of = REWARDS[reward]
        self.eval_cfg = eval_config(cfg, method)
        self.localizer = None if method is None else Localizer(
            tokenizer, method, weights=cfg.weights, rules=cfg.localize)

    def _submit(self, rows: list[dict]) -> object:
        raise NotImplementedError

    def _collect(self, handle: object) -> list[dict]:
        raise NotImplementedError

    def _depth(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def score_rows(self, rows: list[dict]) -> list[dict]:
        """Scores rows {task_id, response, ...} as they are: their records, in order."""
        return self._collect(self._submit(rows))

    def submit(self, task_ids: Sequence[str], response_ids: Sequence[Sequence[int]],
               localize: bool = True) -> Pending:
        """Hands rows to the fleet; blocks only while the fleet's queue is full.

        Identical rows (same task, same sampled ids) are sent once and share one record:
        a GRPO group often holds the same answer several times, and scoring it once both
        saves the browser's time and gives it one verdict by construction (two scorings of
        one app may differ where a verdict depends on timing). `localize` False
        (evaluation) scores without localizing: flat weights.
        """
        rows, aligned, shared, first = [], [], [], {}
        for tid, ids in zip(task_ids, response_ids):
            key = (tid, tuple(int(x) for x in ids))
            if key in first:  # decoded and sent once
                sent, ok = first[key]
                shared.append(sent)
                aligned.append(ok)
                continue
            text, ok = response_text(self.tokenizer, ids)
            aligned.append(ok)
            first[key] = (len(rows), ok)
            shared.append(len(rows))
            row = {"task_id": tid, "response": text, "rollout": len(rows)}
            if ok and localize and self.method is not None and self.localizer is not None:
                row["token_ids"] = list(key[1])  # the worker localizes this row
            rows.append(row)
        depth = self._depth()
        t0 = time.perf_counter()
        handle = self._submit(rows)
        return Pending([list(x) for x in response_ids], aligned, handle, t0, depth, localize,
                       shared)

    def collect(self, pending: Pending) -> Scored:
        """Waits for a submitted part; returns its rewards and base weights."""
        t_wait = time.perf_counter()
        records = self._collect(pending.handle)
        done = time.perf_counter()
        if pending.shared is not None:
            first: dict[int, int] = {}  # sent row -> the first row of the part that is it
            for i, j in enumerate(pending.shared):
                first.setdefault(j, i)
            records = [{**records[j], "rollout": i}
                       | ({} if first[j] == i else {"shared_with": first[j]})
                       for i, j in enumerate(pending.shared)]
        n = len(records)
        rewards = np.zeros(n, np.float32)
        valid = np.zeros(n, bool)
        w_out, d_out, errors = [], [], 0
        for i, rec in enumerate(records):
            ids = pending.response_ids[i]
            w, d = np.ones(len(ids), np.float32), np.zeros(len(ids), bool)
            if rec.get("status") == "ok" and rec.get("reward") is not None:
                rewards[i], valid[i] = self.reward_of(rec), True
                if self.method is None or not pending.localize:
                    pass  # flat weights (plain GRPO, evaluation): localization would be thrown away
                elif "weights_base" in rec and len(rec["weights_base"]) == len(ids):
                    w = np.asarray(rec["weights_base"], np.float32)
                    d = np.asarray(rec["diagnosed"], bool)
                else:  # not valid UTF-8, or the worker could not localize it: flat weights
                    errors += 1
            w_out.append(w)
            d_out.append(d)
        return Scored(rewards, valid, w_out, d_out, records, done - pending.submitted, errors,
                      done - t_wait, pending.queue_depth)

    def score(self, task_ids: Sequence[str], response_ids: Sequence[Sequence[int]],
              localize: bool = True) -> Scored:
        return self.collect(self.submit(task_ids, response_ids, localize))


class LocalFleet(Fleet):
    """The default: a persistent local process pool of Chromium workers (`EvaluatorPool`).

    The workers start with the fleet and stay up for the whole run, so no step
    pays a browser start.
    """

    def __init__(self, tasks: dict, cfg: EvaluatorConfig, tokenizer, method: str | None = "grounded",
                 reward: str = "gated"):
        super().__init__(tasks, cfg, tokenizer, method, reward)
        self.pool = EvaluatorPool(tasks, self.eval_cfg, workers=cfg.workers,
                                  max_pending=cfg.max_pending or None, localizer=self.localizer)

    def _submit(self, rows: list[dict]) -> object:
        return self.pool.submit(rows)

    def _collect(self, handle: object) -> list[dict]:
        return self.pool.collect(handle)

    def _depth(self) -> int:
        return self.pool.pending

    def close(self) -> None:
        self.pool.close()


class _ScoringActor:
    """One Ray actor: a Chromium browser scoring rows in-process (`score_rows_async`)."""

    def __init__(self, tasks: dict, eval_cfg: EvalConfig, localizer: Localizer | None = None):
        self.tasks, self.eval_cfg, self.localizer = tasks, eval_cfg, localizer

    def score(self, rows: list[dict]) -> list[dict]:
        import asyncio

        from evaluators.fleet.pool import score_rows_async

        return asyncio.run(score_rows_async(rows, self.tasks, self.eval_cfg,
                                            localizer=self.localizer))


class RayFleet(Fleet):
    """Ray actors (`cfg.workers` of them) for an evaluator cluster.

    Connects to `cfg.ray_address` (e.g. "auto" on a cluster started with
    `launch/ray_cluster.sh`), or starts a local Ray instance when it is empty.
    A submitted part is dealt round-robin to the actors (continuing where the
    last part stopped); at most `cfg.max_pending` rows are in flight.
    """

    def __init__(self, tasks: dict, cfg: EvaluatorConfig, tokenizer, method: str | None = "grounded",
                 reward: str = "gated"):
        import ray

        super().__init__(tasks, cfg, tokenizer, method, reward)
        if not ray.is_initialized():
            ray.init(address=cfg.ray_address or None, include_dashboard=False,
                     log_to_driver=False, **({} if cfg.ray_address else {"num_cpus": max(1, cfg.workers)}))
        actor = ray.remote(num_cpus=1)(_ScoringActor)
        self.actors = [actor.remote(tasks, self.eval_cfg, self.localizer)
                       for _ in range(max(1, cfg.workers))]
        self._turn = 0
        self._inflight: dict = {}  # object ref -> rows in it

    def _depth(self) -> int:
        return sum(self._inflight.values())

    def _settle(self, limit: int) -> None:
        import ray

        while self._inflight and self._depth() > limit:
            done, _ = ray.wait(list(self._inflight), num_returns=1)
            for ref in done:
                self._inflight.pop(ref)

    def _submit(self, rows: list[dict]) -> object:
        k = len(self.actors)
        parts = []  # (ref, row positions)
        for a in range(k):
            pos = list(range(a, len(rows), k))
            if not pos:
                continue
            if self.cfg.max_pending:
                self._settle(max(0, self.cfg.max_pending - len(pos)))
            actor = self.actors[(self._turn + a) % k]
            ref = actor.score.remote([rows[i] for i in pos])
            self._inflight[ref] = len(pos)
            parts.append((ref, pos))
        self._turn = (self._turn + len(rows)) % k
        return (len(rows), parts)

    def _collect(self, handle: object) -> list[dict]:
        import ray

        n, parts = handle
        out: list[dict] = [None] * n  # type: ignore[list-item]
        for ref, pos in parts:
            for i, rec in zip(pos, ray.get(ref)):
                out[i] = rec  # records keep their row's fields (score_with_retries)
            self._inflight.pop(ref, None)
        return out

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)


FLEETS = {"local": LocalFleet, "ray": RayFleet}
