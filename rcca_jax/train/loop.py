"""The RCCA run: SFT warm-up, then rollouts -> evaluator fleet -> weighted GRPO.

The policy starts from a released-format checkpoint (`model.init_from`; the tiny
demo writes a scratch one first) with its own tokenizer, chat template and EOS
ids. Global steps number SFT steps first (0 .. sft.steps-1), then RL steps. A
checkpoint stores the train state of its stage plus metadata (stage, stream
position, RNG, the SFT evaluation), so a run restarted with the same workdir
resumes where it stopped and continues exactly; a resumed run restores into
shapes and never reads the initial weights again. Held-out evaluation runs after
SFT and after RL (`rcca_jax.train.evaluation`), and the final policy is exported
in the released format (`<workdir>/export/final`).

On several JAX processes every process runs this same loop: each samples its own
share of a step's prompts, scores them in its own fleet, and contributes its rows
to the global batch (`rcca_jax.train.multihost`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from evaluators import leaderboard
from rcca_jax import sharding
from rcca_jax.models import Ling
from rcca_jax.state import TrainState, compile_step, global_batch
from rcca_jax.train import batches, multihost, policy as policy_lib
from rcca_jax.train.checkpoints import Checkpoints
from rcca_jax.train.config import RunConfig
from rcca_jax.train.credit import CREDIT
from rcca_jax.train.data import (IndexStream, TaskData, filter_by_reward, load_task_data,
                                 read_sft_examples, tokenize_examples)
from rcca_jax.train import priority
from rcca_jax.train.metrics_log import MetricsLog
from rcca_jax.train.rewards import FLEETS
from rcca_jax.train.sft import init_sft_state, sft_step


class Run:
    """Holds what the stages share: config, data, policy, mesh, fleet, logs, checkpoints."""

    def __init__(self, cfg: RunConfig, workdir: str | Path, progress: bool = True, train: bool = True):
        self.cfg, self.workdir = cfg, Path(workdir)
        self.process, self.processes = jax.process_index(), jax.process_count()
        self.progress = progress and self.process == 0
        self.data: TaskData = load_task_data(cfg.data, self.workdir)
        examples, self.counts = read_sft_examples(cfg.data, self.data)
        self.policy = policy_lib.resolve(cfg.model, self.workdir,
                                         lambda: _scratch_texts(self.data, examples), cfg.seed)
        self.model_cfg = self.policy.config
        self.sampler = dataclasses.replace(cfg.sampler, pad_id=self.policy.pad_id)
        self.prompt_width = cfg.seq_len - cfg.sampler.max_new_tokens
        self._prompts: dict[str, list[int]] = {}
        n = int(np.prod(list(cfg.mesh.values())))
        self.mesh = sharding.make_mesh(cfg.mesh) if n > 1 else None
        method = None if CREDIT[cfg.rl.method] is None else cfg.rl.localization
        self.fleet = FLEETS[cfg.evaluator.backend](self.data.tasks, cfg.evaluator,
                                                   self.policy.tokenizer, method, cfg.rl.reward)
        self.sft_examples = self._sft_data(examples) if train and cfg.sft.steps else []
        self.ckpt = Checkpoints(self.workdir / "checkpoints", cfg.checkpoint)
        self.log = MetricsLog(self.workdir / "tb", enabled=self.process == 0)
        self.meta = {"stage": "sft", "stream": None, "rng": cfg.seed, "sft_reward": None,
                     "sft_reward_se": None, "sft_task_rewards": None}
        self.counts.update(self.data.counts)
        self.counts["tasks/train_prompt_too_long"] = sum(not self.fits(t) for t in self.data.train_ids)
        self.counts["tasks/held_out_prompt_too_long"] = sum(not self.fits(t) for t in self.data.eval_ids)
        self.say("data: " + ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items())))

    # -- prompts ------------------------------------------------------------------
    def prompt_ids(self, task_id: str) -> list[int]:
        if task_id not in self._prompts:
            self._prompts[task_id] = self.policy.prompt_ids(self.data.raw[task_id])
        return self._prompts[task_id]

    def fits(self, task_id: str) -> bool:
        """Whether a task's prompt leaves room for `sampler.max_new_tokens` (else skipped)."""
        return len(self.prompt_ids(task_id)) <= self.prompt_width

    def local_share(self, items: list) -> tuple[list, int]:
        """This process's contiguous share of a global list, and its offset in it."""
        n = len(items) // self.processes
        return items[self.process * n:(self.process + 1) * n], self.process * n

    # -- SFT data -------------------------------------------------------------------
    def _sft_data(self, examples) -> list[tuple[list[int], list[int]]]:
        cfg = self.cfg
        if cfg.data.sft_min_reward >= 0:
            # A cache per process: processes sharing a workdir would interleave their appends,
            # and each must find the same cache on resuming (the scoring is a collective).
            name = ("sft_rewards.jsonl" if self.processes == 1
                    else f"sft_rewards.process{self.process}.jsonl")
            examples, dropped = filter_by_reward(examples, cfg.data.sft_min_reward,
                                                 self.workdir / name, self._rewards)
            self.counts.update(dropped)
        out, too_long = tokenize_examples(examples, self.prompt_ids, self.policy.response_ids,
                                          cfg.seq_len)
        self.counts.update({"sft/too_long_skipped": too_long, "sft/examples": len(out)})
        if not out:
            raise ValueError(f"config.data.sft_source={cfg.data.sft_source!r}: no SFT example is "
                             f"left ({self.counts}); config.sft.steps={cfg.sft.steps} needs some")
        return out

    def _rewards(self, examples) -> list[float | None]:
        """Gated rewards of SFT responses, each process scoring its share (then gathered)."""
        mine = list(range(self.process, len(examples), self.processes))
        records = self.fleet.score_rows([{"task_id": examples[i].task_id,
                                          "response": examples[i].response} for i in mine])
        local = {i: (rec["reward"] if rec.get("status") == "ok" else None)
                 for i, rec in zip(mine, records)}
        merged = {int(k): v for part in multihost.allgather_objects(local) for k, v in part.items()}
        return [merged[i] for i in range(len(examples))]

    # -- state ----------------------------------------------------------------------
    def put(self, batch: dict) -> dict:
        if self.mesh is None:
            return {k: jnp.asarray(v) for k, v in batch.items()}
        return global_batch(batch, self.mesh)

    def model_of(self, graphdef, state: TrainState) -> Ling:
        return nnx.merge(graphdef, state.params, state.rest)

    def abstract_model(self) -> Ling:
        return nnx.eval_shape(lambda: Ling(self.model_cfg, nnx.Rngs(0)))

    def shardings(self, state: TrainState):
        from rcca_jax.state import state_shardings

        return None if self.mesh is None else state_shardings(state, self.mesh)

    def save(self, step: int, state: TrainState, force: bool = False) -> None:
        self.ckpt.save(step, state, dict(self.meta), force=force)

    def restore(self, step: int, state: TrainState) -> TrainState:
        restored, self.meta = self.ckpt.restore(step, state, self.shardings(state))
        return restored

    def log_step(self, step: int, metrics: dict, bar) -> None:
        flat = self.log.scalars(step, metrics)
        if self.process == 0:
            with open(self.workdir / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": step, **flat}) + "\n")
        if bar is not None:
            shown = {k: f"{v:.3g}" for k, v in flat.items() if k in ("sft/loss", "reward/mean", "loss/pg")}
            bar.set_postfix(shown)
            bar.update(1)

    def yield_cpu(self) -> None:
        """The compute threads yield to the scoring pages (`EvaluatorConfig.compute_nice`)."""
        priority.yield_cpu(self.cfg.evaluator.compute_nice)

    def say(self, text: str) -> None:
        if self.process == 0:
            print(text, file=sys.stderr, flush=True)

    def bar(self, total: int, first: int, desc: str):
        if not self.progress or total == 0:
            return None
        from tqdm import tqdm

        return tqdm(total=total, initial=first, desc=desc, unit="step")

    def export(self, model: Ling, name: str) -> Path:
        dest = policy_lib.export(model, self.policy, self.workdir / "export" / name, self.cfg.export.dtype)
        self.say(f"exported the policy to {dest}")
        return dest

    def close(self) -> None:
        self.fleet.close()
        self.ckpt.close()
        self.log.close()


def _scratch_texts(data: TaskData, examples) -> list[str]:
    """What a scratch tokenizer is trained on: training prompts and SFT responses."""
    from rcca_jax.data.tokenizer import prompt_text

    by_task = {ex.task_id: ex.response for ex in examples}
    return [prompt_text(data.raw[t]) + by_task.get(t, "") for t in data.train_ids]


def _meta_only():
    import orbax.checkpoint as ocp

    return ocp.args.Composite(meta=ocp.args.JsonRestore())


def run_sft(run: Run, model: Ling, first: int) -> Ling:
    """SFT steps first .. sft.steps-1 (resuming from the checkpoint at `first` if > 0)."""
    cfg = run.cfg
    if cfg.sft.batch_size % run.processes:
        raise ValueError(f"config.sft.batch_size={cfg.sft.batch_size} must split evenly over "
                         f"{run.processes} processes")
    graphdef, state = init_sft_state(model, cfg.sft)
    per = cfg.sft.batch_size // run.processes
    example = batches.sft_batch([[0]] * per, [[0]] * per, cfg.seq_len, 0)
    state, step_fn = compile_step(lambda s, b: sft_step(graphdef, cfg.sft, cfg.train.logprob_chunk, s, b),
                                  state, example, run.mesh)
    if first:
        state = run.restore(first, state)
    stream = IndexStream(len(run.sft_examples), cfg.data.seed, run.meta["stream"])
    bar = run.bar(cfg.sft.steps, first, "sft")
    for step in range(first, cfg.sft.steps):
        mine, _ = run.local_share(stream.next(cfg.sft.batch_size))
        b = batches.sft_batch([run.sft_examples[i][0] for i in mine],
                              [run.sft_examples[i][1] for i in mine], cfg.seq_len, run.policy.pad_id)
        state, metrics = step_fn(state, run.put(b))
        run.meta["stream"] = stream.state()
        run.log_step(step, jax.device_get(metrics), bar)
        if step + 1 < cfg.sft.steps:
            run.save(step + 1, state)
    if bar is not None:
        bar.close()
    return run.model_of(graphdef, state)


def run(cfg: RunConfig, workdir: str | Path, progress: bool = True) -> dict:
    """SFT then RCCA; resumes from the workdir. Returns the held-out evaluations.

    Returns:
      {"sft": mean gated reward after SFT (None if not evaluated), "rcca": after RL,
       "sft_se", "rcca_se": their standard errors (tasks as the unit), "difference": rcca - sft
       paired by task {"mean", "se", "tasks"} (when both were evaluated),
       "eval": {"sft": report, "rl": report}} (reports: `evaluators.leaderboard.report`).
    """
    from rcca_jax.train.evaluation import evaluate
    from rcca_jax.train.rl import run_rl

    r = Run(cfg, workdir, progress)
    latest = r.ckpt.latest()
    if latest is not None:
        r.meta = r.ckpt.manager.restore(latest, args=_meta_only()).meta
        r.say(f"resuming {workdir} at step {latest} (remove the directory for a fresh run)")
    # A resumed run restores into shapes: the initial weights are read only when starting.
    model = r.abstract_model() if latest is not None else r.policy.load(r.mesh)
    reports = {}
    if r.meta["stage"] == "sft":
        if cfg.sft.steps:
            model = run_sft(r, model, latest or 0)
        if cfg.eval.after_sft:
            reports["sft"] = evaluate(r, model, "sft", cfg.sft.steps)
            r.meta["sft_reward"] = reports["sft"]["all"]["reward"]
            r.meta["sft_reward_se"] = reports["sft"]["all"]["reward_se"]
            r.meta["sft_task_rewards"] = reports["sft"]["task_rewards"]
        r.meta.update(stage="rl", stream=None)
        first = cfg.sft.steps
    else:
        first = latest
    model = run_rl(r, model, first)
    reports["rl"] = evaluate(r, model, "rl", cfg.sft.steps + cfg.rl.steps)
    r.export(model, "final")
    r.close()
    result = {"sft": r.meta["sft_reward"], "rcca": reports["rl"]["all"]["reward"],
              "sft_se": r.meta.get("sft_reward_se"), "rcca_se": reports["rl"]["all"]["reward_se"],
              "eval": reports}
    if r.meta.get("sft_task_rewards"):
        # Same tasks, same sampling keys after SFT and after RL: a paired difference.
        d, se, n = leaderboard.paired_difference(r.meta["sft_task_rewards"],
                                                 reports["rl"]["task_rewards"])
        result["difference"] = {"mean": d, "se": se, "tasks": n}
    if r.process == 0:
        (r.workdir / "result.json").write_text(json.dumps(result, indent=2))
    return result
