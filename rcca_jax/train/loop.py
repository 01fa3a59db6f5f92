"""The RCCA run: SFT warm-up, then rollouts -> evaluator fleet -> weighted GRPO.

Global steps number SFT steps first (0 .. sft.steps-1), then RL steps. A
checkpoint stores the train state of its stage plus metadata (stage, prompt
stream position, RNG, the SFT-only evaluation), so a run restarted with the
same workdir resumes where it stopped and continues exactly.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from evaluators.localize.weights import asymmetric_weights_batch
from rcca_jax import sharding
from rcca_jax.models import Ling
from rcca_jax.rl.loss import group_advantages
from rcca_jax.rl.sampler import SamplerConfig, sample
from rcca_jax.rl.train_step import TrainState, compile_step, compile_train_step, global_batch, init_state
from rcca_jax.train import batches
from rcca_jax.train.checkpoints import Checkpoints
from rcca_jax.train.config import RunConfig
from rcca_jax.train.data import PromptStream, TaskData, load_task_data
from rcca_jax.train.metrics_log import MetricsLog
from rcca_jax.train.rewards import FLEETS, Scored
from rcca_jax.train.sft import init_sft_state, sft_step


class Run:
    """Holds what the stages share: config, data, mesh, fleet, logs, checkpoints."""

    def __init__(self, cfg: RunConfig, workdir: str | Path, progress: bool = True):
        self.cfg, self.workdir = cfg, Path(workdir)
        self.data: TaskData = load_task_data(cfg.data, self.workdir)
        n_tok = len(self.data.tokenizer)
        if n_tok > cfg.model.vocab_size:
            raise ValueError(f"config.model.vocab_size={cfg.model.vocab_size} is smaller than the "
                             f"tokenizer's {n_tok} tokens")
        if n_tok < cfg.model.vocab_size:
            # A BPE trained to `vocab_size` can come out smaller; ids past it must never be sampled.
            cfg = dataclasses.replace(cfg, model=cfg.model.replace(vocab_size=n_tok))
            self.cfg = cfg
        n = int(np.prod(list(cfg.mesh.values())))
        self.mesh = sharding.make_mesh(cfg.mesh) if n > 1 else None
        self.fleet = FLEETS[cfg.evaluator.backend](self.data.tasks, cfg.evaluator, self.data.tokenizer,
                                                   cfg.rl.localization if cfg.rl.method == "rcca"
                                                   else None, cfg.rl.reward)
        self.ckpt = Checkpoints(self.workdir / "checkpoints", cfg.checkpoint)
        self.log = MetricsLog(self.workdir / "tb")
        self.progress = progress
        self.meta = {"stage": "sft", "stream": None, "rng": cfg.seed, "sft_reward": None}
        self.prompt_width = cfg.seq_len - cfg.sampler.max_new_tokens

    def put(self, batch: dict) -> dict:
        if self.mesh is None:
            return {k: jnp.asarray(v) for k, v in batch.items()}
        return global_batch(batch, self.mesh)

    def model_of(self, graphdef, state: TrainState) -> Ling:
        return nnx.merge(graphdef, state.params, state.rest)

    def save(self, step: int, state: TrainState, force: bool = False) -> None:
        self.ckpt.save(step, state, dict(self.meta), force=force)

    def restore(self, step: int, state: TrainState) -> TrainState:
        restored, self.meta = self.ckpt.restore(step, state)
        return restored

    def log_step(self, step: int, metrics: dict, bar) -> None:
        flat = self.log.scalars(step, metrics)
        with open(self.workdir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, **flat}) + "\n")
        if bar is not None:
            shown = {k: f"{v:.3g}" for k, v in flat.items() if k in ("sft/loss", "reward/mean", "loss/pg")}
            bar.set_postfix(shown)
            bar.update(1)


def _meta_only():
    import orbax.checkpoint as ocp

    return ocp.args.Composite(meta=ocp.args.JsonRestore())


def evaluate(run: Run, model: Ling, task_ids: list[str], rng: jax.Array) -> float:
    """Mean gated reward of the policy on `task_ids` (valid evaluations only).

    `rl.eval_samples` answers per prompt at the sampling temperature (the
    quantity RL maximises), or one greedy answer when it is 0. The same `rng`
    before and after RL gives both evaluations common random numbers.
    """
    n = run.cfg.rl.eval_samples
    scfg = dataclasses.replace(run.cfg.sampler, group_size=max(n, 1),
                               temperature=run.cfg.sampler.temperature if n else 0.0)
    _, _, scored, _ = sample_and_score(run, model, task_ids, rng, scfg)
    # Always the gated reward (the task's own), whatever reward the RL variant trains on.
    vals = [float(r["reward"]) for r in scored.records if r.get("status") == "ok"]
    return float(np.mean(vals)) if vals else float("nan")


def _strip_eos(ids: np.ndarray, eos: int) -> np.ndarray:
    return ids[:-1] if len(ids) and ids[-1] == eos else ids


def run_sft(run: Run, model: Ling, first: int) -> Ling:
    """SFT steps first .. sft.steps-1 (resuming from the checkpoint at `first` if > 0)."""
    cfg = run.cfg
    graphdef, state = init_sft_state(model, cfg.sft)
    example = batches.sft_batch([[0]] * cfg.sft.batch_size, [[0]] * cfg.sft.batch_size, cfg.seq_len, 0)
    state, step_fn = compile_step(lambda s, b: sft_step(graphdef, cfg.sft, cfg.train.logprob_chunk, s, b),
                                  state, example, run.mesh)
    if first:
        state = run.restore(first, state)
    stream = PromptStream(run.data.source, cfg.data.seed, run.meta["stream"])
    bar = _bar(run, cfg.sft.steps, first, "sft")
    for step in range(first, cfg.sft.steps):
        ids = stream.next(cfg.sft.batch_size)
        b = batches.sft_batch([run.data.prompt_ids(t) for t in ids], [run.data.reference_ids(t) for t in ids],
                              cfg.seq_len, run.data.pad_id)
        state, metrics = step_fn(state, run.put(b))
        run.meta["stream"] = stream.state()
        run.log_step(step, jax.device_get(metrics), bar)
        if step + 1 < cfg.sft.steps:
            run.save(step + 1, state)
    if bar is not None:
        bar.close()
    return run.model_of(graphdef, state)


def _bar(run: Run, total: int, first: int, desc: str):
    if not run.progress or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=first, desc=desc, unit="step")


def sample_and_score(run: Run, model: Ling, task_ids: list[str], rng: jax.Array,
                     scfg: SamplerConfig):
    """Samples `scfg.group_size` answers per prompt, `rl.prompts_per_sample` prompts per call,
    streaming each call's groups to the fleet while the next call samples.

    Returns:
      (response ids per row, sampling log-probs per row, Scored, timing metrics).
    """
    g, k = scfg.group_size, run.cfg.rl.prompts_per_sample
    pending, ids, logp, t_sample, n_tok = [], [], [], 0.0, 0
    for c, lo in enumerate(range(0, len(task_ids), k)):
        part = task_ids[lo:lo + k]
        t0 = time.perf_counter()
        out = jax.device_get(sample(model, [run.data.prompt_ids(t) for t in part],
                                    jax.random.fold_in(rng, c), scfg, width=run.prompt_width))
        t_sample += time.perf_counter() - t0
        n_tok += int(out.lengths.sum())
        part_ids = batches.response_ids(out.tokens, out.lengths)
        pending.append(run.fleet.submit([t for t in part for _ in range(g)],
                                        [_strip_eos(r, run.data.eos_id) for r in part_ids]))
        ids += part_ids
        logp += [out.logprobs[i, :len(r)] for i, r in enumerate(part_ids)]
    scored = Scored.concat([run.fleet.collect(p) for p in pending])
    return ids, logp, scored, {"time/sample_s": t_sample, "throughput/sampled_tokens_per_s":
                               n_tok / max(t_sample, 1e-9)}


def rl_step(run: Run, graphdef, state: TrainState, step_fn, stream: PromptStream, rng: jax.Array):
    """Sample G answers per prompt, evaluate them, build the weighted batch, train once."""
    cfg = run.cfg
    g = cfg.sampler.group_size
    task_ids = stream.next(cfg.rl.prompts_per_step)
    prompts = [run.data.prompt_ids(t) for t in task_ids]
    ids, logp, scored, timing = sample_and_score(run, run.model_of(graphdef, state), task_ids, rng,
                                                 cfg.sampler)
    adv = np.asarray(group_advantages(jnp.asarray(scored.rewards), jnp.asarray(scored.valid), g))
    weights = None
    w_rows, d_rows = [], []
    if cfg.rl.method == "rcca":
        for i, r in enumerate(ids):
            w, d = batches.pad_weights(scored.weights_base[i], scored.diagnosed[i], len(r))
            w_rows.append(w)
            d_rows.append(d)
        weights = [asymmetric_weights_batch(w[None], d[None], adv[i:i + 1])[0]
                   for i, (w, d) in enumerate(zip(w_rows, d_rows))]
    prompt_rows = [p for p in prompts for _ in range(g)]
    batch = batches.rl_batch(prompt_rows, ids, logp, adv, scored.valid, weights, cfg.seq_len,
                             run.data.pad_id)
    t0 = time.perf_counter()
    batch = run.put(batch)
    for u in range(cfg.rl.updates_per_step):
        state, metrics = step_fn(state, batch)
        if u == 0:
            # The first update is on-policy: this measures sampler/trainer log-prob agreement.
            on_policy_diff = metrics["policy/logp_diff_max"]
    metrics = dict(jax.device_get(metrics))  # those of the last update
    metrics["policy/sampler_logp_diff_max"] = float(on_policy_diff)
    metrics.update(reward_metrics(scored, weights, d_rows, adv))
    metrics.update(timing)
    metrics.update({"time/train_s": time.perf_counter() - t0,
                    "time/evaluate_wait_s": scored.wait_seconds,
                    "evaluator/latency_s": scored.seconds,
                    "evaluator/queue_depth": float(scored.queue_depth)})
    return state, metrics, scored


def reward_metrics(scored, weights, diagnosed, adv) -> dict:
    recs = scored.records
    n = max(len(recs), 1)
    gated = [float(r["reward"]) for r in recs if r.get("status") == "ok" and r.get("reward") is not None]
    m = {"reward/mean": float(scored.rewards[scored.valid].mean()) if scored.valid.any() else 0.0,
         # The task's own (gated) reward, whatever reward the variant trains on: comparable across runs.
         "reward/gated_mean": float(np.mean(gated)) if gated else 0.0,
         "reward/error_frac": float((~scored.valid).mean()),
         "advantage/mean_abs": float(np.abs(adv).mean()),
         "localize/align_errors": float(scored.align_errors)}
    for gate in ("format", "source", "runtime"):
        m[f"reward/gate_{gate}_frac"] = sum(r.get("gate") == gate for r in recs) / n
    passes: dict[str, list[bool]] = {}
    for r in recs:
        for v in r.get("rubrics") or ():
            if v.get("verdict") in ("pass", "fail"):
                passes.setdefault(v["id"], []).append(v["verdict"] == "pass")
    m.update({f"rubric/{k}": float(np.mean(v)) for k, v in passes.items()})
    if weights is not None and diagnosed:
        dmask = np.concatenate(diagnosed)
        w = np.concatenate(weights)
        neg = np.concatenate([np.full(len(x), a < 0) for x, a in zip(weights, adv)])
        sel = dmask & neg
        m["weights/frac_diagnosed"] = float(dmask.mean()) if dmask.size else 0.0
        m["weights/mean_dir"] = float(w[sel].mean()) if sel.any() else 1.0
        m["weights/mean"] = float(w.mean()) if w.size else 1.0
    return m


def run_rl(run: Run, model: Ling, first: int) -> Ling:
    """RL steps `first` .. sft.steps + rl.steps - 1 (global numbering)."""
    cfg = run.cfg
    graphdef, state = init_state(model, cfg.train)
    n_rows = cfg.rl.prompts_per_step * cfg.sampler.group_size
    example = batches.rl_batch([[0]] * n_rows, [np.zeros(1, np.int32)] * n_rows, [np.zeros(1)] * n_rows,
                               np.zeros(n_rows), np.ones(n_rows, bool),
                               None if cfg.rl.method == "grpo" else [np.ones(1)] * n_rows, cfg.seq_len, 0)
    state, step_fn = compile_train_step(graphdef, cfg.train, state, example, run.mesh)
    start, end = cfg.sft.steps, cfg.sft.steps + cfg.rl.steps
    if first > start or (first == start and run.ckpt.latest() == start):
        state = run.restore(first, state)
    else:
        run.save(start, state, force=True)
    stream = PromptStream(run.data.source, cfg.data.seed + 1, run.meta["stream"])
    rng = jax.random.PRNGKey(run.meta["rng"])
    bar = _bar(run, cfg.rl.steps, first - start, "rl")
    for step in range(first, end):
        key = jax.random.fold_in(rng, step)
        _profile(run, step - start)
        state, metrics, scored = rl_step(run, graphdef, state, step_fn, stream, key)
        run.meta["stream"] = stream.state()
        run.log_step(step, metrics, bar)
        for rec in scored.records[:run.cfg.log.sample_apps]:
            run.log.text(step, "sample_app", rec.get("response", "")[:4000])
        run.save(step + 1, state, force=step + 1 == end)
    if bar is not None:
        bar.close()
    return run.model_of(graphdef, state)


def _profile(run: Run, rl_step_index: int) -> None:
    lc = run.cfg.log
    if lc.profile_start < 0:
        return
    if rl_step_index == lc.profile_start:
        jax.profiler.start_trace(str(run.workdir / "profile"))
    if rl_step_index == lc.profile_start + lc.profile_steps:
        jax.profiler.stop_trace()


def run(cfg: RunConfig, workdir: str | Path, progress: bool = True) -> dict:
    """SFT then RCCA; resumes from the workdir. Returns {"sft": reward, "rcca": reward}."""
    r = Run(cfg, workdir, progress)
    cfg = r.cfg
    latest = r.ckpt.latest()
    if latest is not None:
        r.meta = r.ckpt.manager.restore(latest, args=_meta_only()).meta
        if progress:
            print(f"resuming {workdir} at step {latest} (remove the directory for a fresh run)",
                  file=sys.stderr)
    model = Ling(cfg.model, nnx.Rngs(cfg.seed))
    eval_ids = sorted(r.data.raw)[:cfg.rl.eval_prompts]
    eval_key = jax.random.PRNGKey(cfg.seed + 7)
    if r.meta["stage"] == "sft":
        model = run_sft(r, model, latest or 0)
        r.meta.update(stage="rl", sft_reward=evaluate(r, model, eval_ids, eval_key),
                      stream=None)
        first = cfg.sft.steps
    else:
        first = latest
    model = run_rl(r, model, first)
    rcca = evaluate(r, model, eval_ids, eval_key)
    r.fleet.close()
    r.ckpt.close()
    r.log.close()
    result = {"sft": r.meta["sft_reward"], "rcca": rcca}
    (r.workdir / "result.json").write_text(json.dumps(result))
    return result
