"""Rollouts -> the evaluator fleet -> rewards, validity and per-token base weights.

Runs on the host (CPU): decodes sampled ids to response text, scores the
responses in the evaluator fleet (real Chromium, JS coverage on failing
probes), localizes the diagnostics and turns them into `weights_base` and
`diagnosed` over the *sampled* ids. An evaluator error is never the model's
fault: such rows come back with `valid=False` and are masked by the trainer.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import numpy as np

from evaluators.config import EvalConfig
from evaluators.localize.api import localize_record
from evaluators.localize.tokens import token_bytes
from evaluators.pool import EvaluatorPool
from rcca_jax.train.config import EvaluatorConfig


@dataclasses.dataclass
class Scored:
    """Per-rollout results, aligned with the rollout rows."""

    rewards: np.ndarray          # f32 [N]
    valid: np.ndarray            # bool [N]; False: evaluation error
    weights_base: list[np.ndarray]  # f32 [L_i] per rollout (response ids, EOS excluded)
    diagnosed: list[np.ndarray]     # bool [L_i]
    records: list[dict]
    seconds: float
    align_errors: int


def response_text(tokenizer, ids: Sequence[int]) -> tuple[str, bool]:
    """The exact text of sampled ids (their bytes, concatenated); False if not valid UTF-8."""
    data = b"".join(token_bytes(tokenizer, list(ids)))
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def eval_config(cfg: EvaluatorConfig) -> EvalConfig:
    base = EvalConfig()
    browser = dataclasses.replace(base.browser, pages_per_worker=cfg.pages_per_worker,
                                  probe_time_limit_ms=cfg.probe_time_limit_ms, coverage=True)
    return dataclasses.replace(base, browser=browser)


def _pass_rate(rec: dict) -> float:
    """Plain GRPO's reward: the share of judged rubrics that pass (no gates, no severities)."""
    judged = [r for r in rec.get("rubrics") or () if r.get("verdict") in ("pass", "fail")]
    return sum(r["verdict"] == "pass" for r in judged) / len(judged) if judged else 0.0


REWARDS = {"gated": lambda rec: float(rec["reward"]), "pass_rate": _pass_rate}


class Fleet:
    """Scores rollouts; backends differ only in how records are produced (`_records`)."""

    def __init__(self, tasks: dict, cfg: EvaluatorConfig, tokenizer, method: str = "grounded",
                 reward: str = "gated"):
        self.tasks, self.cfg, self.tokenizer, self.method = tasks, cfg, tokenizer, method
        self.reward_of = REWARDS[reward]
        self.eval_cfg = eval_config(cfg)

    def _records(self, rows: list[dict]) -> list[dict]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def score(self, task_ids: Sequence[str], response_ids: Sequence[Sequence[int]]) -> Scored:
        t0 = time.perf_counter()
        rows, aligned = [], []
        for i, (tid, ids) in enumerate(zip(task_ids, response_ids)):
            text, ok = response_text(self.tokenizer, ids)
            rows.append({"task_id": tid, "response": text, "rollout": i})
            aligned.append(ok)
        records = self._records(rows)
        n = len(rows)
        rewards = np.zeros(n, np.float32)
        valid = np.zeros(n, bool)
        w_out, d_out, errors = [], [], 0
        for i, rec in enumerate(records):
            ids = list(response_ids[i])
            w, d = np.ones(len(ids), np.float32), np.zeros(len(ids), bool)
            if rec.get("status") == "ok" and rec.get("reward") is not None:
                rewards[i], valid[i] = self.reward_of(rec), True
                if aligned[i]:
                    try:
                        loc = localize_record(rec, self.method, self.tokenizer, ids,
                                              task=self.tasks[rec["task_id"]])
                        w = np.asarray(loc["weights_base"], np.float32)
                        d = np.asarray(loc["diagnosed"], bool)
                        records[i] = loc
                    except ValueError:
                        errors += 1
                else:
                    errors += 1
            w_out.append(w)
            d_out.append(d)
        return Scored(rewards, valid, w_out, d_out, records, time.perf_counter() - t0, errors)


class LocalFleet(Fleet):
    """The default: a local process pool of Chromium workers (`EvaluatorPool`)."""

    def _records(self, rows: list[dict]) -> list[dict]:
        return list(EvaluatorPool(self.tasks, self.eval_cfg, workers=self.cfg.workers).score(rows))


class _ScoringActor:
    """One Ray actor: a Chromium browser scoring rows in-process (`score_rows_async`)."""

    def __init__(self, tasks: dict, eval_cfg: EvalConfig):
        self.tasks, self.eval_cfg = tasks, eval_cfg

    def score(self, rows: list[dict]) -> list[dict]:
        import asyncio

        from evaluators.pool import score_rows_async

        return asyncio.run(score_rows_async(rows, self.tasks, self.eval_cfg))


class RayFleet(Fleet):
    """Ray actors (`cfg.workers` of them) for an evaluator cluster.

    Connects to `cfg.ray_address` (e.g. "auto" on a cluster started with
    `launch/ray_cluster.sh`), or starts a local Ray instance when it is empty.
    Rows are dealt round-robin to the actors; output order is input order.
    """

    def __init__(self, tasks: dict, cfg: EvaluatorConfig, tokenizer, method: str = "grounded",
                 reward: str = "gated"):
        import ray

        super().__init__(tasks, cfg, tokenizer, method, reward)
        if not ray.is_initialized():
            ray.init(address=cfg.ray_address or None, include_dashboard=False,
                     log_to_driver=False, **({} if cfg.ray_address else {"num_cpus": max(1, cfg.workers)}))
        actor = ray.remote(num_cpus=1)(_ScoringActor)
        self.actors = [actor.remote(tasks, self.eval_cfg) for _ in range(max(1, cfg.workers))]

    def _records(self, rows: list[dict]) -> list[dict]:
        import ray

        k = len(self.actors)
        parts = [rows[i::k] for i in range(k)]
        results = ray.get([a.score.remote(p) for a, p in zip(self.actors, parts) if p])
        out: list[dict] = [None] * len(rows)  # type: ignore[list-item]
        for i, recs in enumerate(results):
            for j, rec in enumerate(recs):
                out[i + j * k] = rec  # records keep their row's fields (score_with_retries)
        return out

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)


FLEETS = {"local": LocalFleet, "ray": RayFleet}
