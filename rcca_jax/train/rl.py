"""The RL stage: rollouts of each process's prompts -> its fleet -> weighted GRPO on the global batch.

A step draws `rl.prompts_per_step` training prompts from the stream (the same on
every process); process p samples the p-th contiguous share, `rl.prompts_per_sample`
prompts per sampler call, streaming each call's groups to its fleet while the next
call samples. Rewards, advantages (within each group, so within a process) and
per-token weights of its own rows come back to it, and the global batch is
assembled from every process's rows. Sampling keys depend on a prompt's position
in the step's global list (`sampler.row_keys`), so a step gives the same rollouts
on one process or on many.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from rcca_jax.models import Ling
from rcca_jax.rl.loss import group_advantages
from rcca_jax.rl.sampler import SamplerConfig, sample
from rcca_jax.rl.train_step import (Reference, compile_reference_logprobs, compile_train_step,
                                    init_state, make_reference, uses_reference)
from rcca_jax.state import TrainState, is_abstract
from rcca_jax.train import batches, multihost
from evaluators.tasks.bugs import Bug, find
from rcca_jax.train.credit import CREDIT
from rcca_jax.train.data import PromptStream
from rcca_jax.train.rewards import Scored


def _strip_eos(ids: np.ndarray, eos: tuple[int, ...]) -> np.ndarray:
    return ids[:-1] if len(ids) and int(ids[-1]) in eos else ids


def sample_and_score(run, model: Ling, task_ids: list[str], rng: jax.Array, scfg: SamplerConfig,
                     first_id: int = 0, localize: bool = True):
    """Samples `scfg.group_size` answers per prompt, `rl.prompts_per_sample` prompts per call,
    streaming each call's groups to the fleet while the next call samples.

    Args:
      run: the Run.
      model: the policy.
      task_ids: this process's prompts.
      rng: the key of the whole global list.
      scfg: sampling settings.
      first_id: position of `task_ids[0]` in the global list (the key schedule).
      localize: whether the fleet localizes the diagnostics (not for evaluation).
    Returns:
      (response ids per row, sampling log-probs per row, Scored, timing metrics).
    """
    g, k = scfg.group_size, run.cfg.rl.prompts_per_sample
    pending, ids, logp, t_sample, n_tok = [], [], [], 0.0, 0
    eos = run.model_cfg.eos_ids
    for lo in range(0, len(task_ids), k):
        part = task_ids[lo:lo + k]
        t0 = time.perf_counter()
        out = sample(model, [run.prompt_ids(t) for t in part], rng, scfg, width=run.prompt_width,
                     prompt_ids=np.arange(first_id + lo, first_id + lo + len(part)), mesh=run.mesh)
        t_sample += time.perf_counter() - t0
        n_tok += int(out.lengths.sum())
        part_ids = batches.response_ids(out.tokens, out.lengths)
        pending.append(run.fleet.submit([t for t in part for _ in range(g)],
                                        [_strip_eos(r, eos) for r in part_ids], localize))
        ids += part_ids
        logp += [out.logprobs[i, :len(r)] for i, r in enumerate(part_ids)]
    scored = Scored.concat([run.fleet.collect(p) for p in pending])
    return ids, logp, scored, {"time/sample_s": t_sample, "throughput/sampled_tokens_per_s":
                               n_tok / max(t_sample, 1e-9)}


def _localized(scored: Scored, ids) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each row's base weights and diagnosed mask over its sampled ids (EOS: 1, not diagnosed);
    the train step turns them into the final weights with the advantage's sign."""
    rows = [batches.pad_weights(scored.weights_base[i], scored.diagnosed[i], len(r))
            for i, r in enumerate(ids)]
    return [w for w, _ in rows], [d for _, d in rows]


def rl_step(run, graphdef, state: TrainState, step_fn, ref_fn, ref: Reference | None,
            stream: PromptStream, rng: jax.Array, bugs: dict[str, Bug] | None = None):
    """Samples this process's share, scores it, builds the global batch, trains."""
    cfg = run.cfg
    g = cfg.sampler.group_size
    mine, offset = run.local_share(stream.next(cfg.rl.prompts_per_step))
    ids, logp, scored, timing = sample_and_score(run, run.model_of(graphdef, state), mine, rng,
                                                 run.sampler, offset)
    adv = np.asarray(group_advantages(jnp.asarray(scored.rewards), jnp.asarray(scored.valid), g))
    credit = CREDIT[cfg.rl.method]
    localized = None if credit is None else credit(
        *_localized(scored, ids), ids, scored.rewards, g, cfg.seed)
    prompt_rows = [run.prompt_ids(t) for t in mine for _ in range(g)]
    local = batches.rl_batch(prompt_rows, ids, logp, adv, scored.valid, localized, cfg.seq_len,
                             run.policy.pad_id)
    t0 = time.perf_counter()
    batch = run.put(local)
    if ref is not None:
        batch["ref_logp"] = ref_fn(ref, batch)
    for u in range(cfg.rl.updates_per_step):
        state, metrics = step_fn(state, batch)
        if u == 0:
            # The first update is on-policy: this measures sampler/trainer log-prob agreement.
            on_policy_diff = metrics["policy/logp_diff_max"]
    metrics = dict(jax.device_get(metrics))  # those of the last update
    metrics["policy/sampler_logp_diff_max"] = float(on_policy_diff)
    metrics.update(reward_metrics(scored, adv, bugs))
    metrics.update(timing)
    metrics.update({"time/train_s": time.perf_counter() - t0,
                    "time/evaluate_wait_s": scored.wait_seconds,
                    "evaluator/latency_s": scored.seconds,
                    "evaluator/queue_depth": float(scored.queue_depth)})
    return state, metrics, scored


def testbed_bugs(tasks: dict) -> dict[str, Bug]:
    """{task id: the bug its SFT reference carried} (`data.sft_bug_fraction`; {} without)."""
    return {tid: Bug.from_json(t.meta["sft_bug"]) for tid, t in tasks.items()
            if isinstance(t.meta.get("sft_bug"), dict)}


def _row_summary(scored: Scored, adv, bugs: dict[str, Bug] | None = None) -> dict:
    """What the step's metrics need from this process's rows (JSON: gathered across processes)."""
    recs = scored.records
    out = {"rewards": [float(x) for x in scored.rewards], "valid": [bool(x) for x in scored.valid],
           "gated": [float(r["reward"]) for r in recs if r.get("status") == "ok"
                     and r.get("reward") is not None],
           "gates": [r.get("gate") for r in recs], "adv_abs": [float(abs(a)) for a in adv],
           "align_errors": scored.align_errors, "rubrics": {},
           # Answers to a testbed task that hold its injected bug (the policy still writes it).
           "bug": [find(r.get("response") or "", bugs[r["task_id"]]) is not None
                   for r in recs if bugs and r.get("task_id") in bugs]}
    for r in recs:
        for v in r.get("rubrics") or ():
            if v.get("verdict") in ("pass", "fail"):
                out["rubrics"].setdefault(v["id"], []).append(v["verdict"] == "pass")
    return out


def reward_metrics(scored: Scored, adv, bugs: dict[str, Bug] | None = None) -> dict:
    """The step's reward, gate and rubric metrics over the rows of every process (the weight
    metrics come from the train step, which applies the weights); with the testbed's `bugs`,
    the share of answers to bugged tasks that hold the bug (`testbed/bug_rate`)."""
    parts = multihost.allgather_objects(_row_summary(scored, adv, bugs))
    cat = lambda key: [x for p in parts for x in p[key]]  # noqa: E731
    rewards, valid, gated, gates = np.asarray(cat("rewards")), np.asarray(cat("valid"), bool), \
        cat("gated"), cat("gates")
    n = max(len(gates), 1)
    m = {"reward/mean": float(rewards[valid].mean()) if valid.any() else 0.0,
         # The task's own (gated) reward, whatever reward the variant trains on: comparable across runs.
         "reward/gated_mean": float(np.mean(gated)) if gated else 0.0,
         "reward/error_frac": float((~valid).mean()) if valid.size else 0.0,
         "advantage/mean_abs": float(np.mean(cat("adv_abs"))) if cat("adv_abs") else 0.0,
         "localize/align_errors": float(sum(p["align_errors"] for p in parts))}
    for gate in ("format", "source", "runtime"):
        m[f"reward/gate_{gate}_frac"] = sum(x == gate for x in gates) / n
    rubrics: dict[str, list[bool]] = {}
    for p in parts:
        for k, v in p["rubrics"].items():
            rubrics.setdefault(k, []).extend(v)
    m.update({f"rubric/{k}": float(np.mean(v)) for k, v in rubrics.items()})
    if cat("bug"):
        m["testbed/bug_rate"] = float(np.mean(cat("bug")))
    return m


def _reference(run, state: TrainState, resumed: bool, at_start: bool) -> Reference:
    """The frozen KL reference: the policy RL starts from, saved once beside the checkpoints.

    A resumed run restores it (it is not the current policy any more); a new RL stage
    copies its initial policy in `train.kl_ref_dtype` (default the compute dtype), and so
    does a run resumed at the RL start with no reference saved (stopped before it was
    written, or a workdir forked from another run's RL-start checkpoint): its policy is
    still the initial one.
    """
    dtype = jnp.dtype(run.cfg.train.kl_ref_dtype or run.model_cfg.dtype)
    ckpt = ocp.StandardCheckpointer()
    path = (run.workdir / "reference").absolute()
    if resumed and not path.exists() and not at_start:
        raise FileNotFoundError(f"{path}: the KL reference of this RL stage is missing, and the "
                                "run resumes after its start, where the policy is not the "
                                "reference any more")
    if resumed and path.exists():
        target = jax.eval_shape(lambda s: make_reference(s, dtype), state)
        shard = None
        if run.mesh is not None:
            from rcca_jax import sharding

            shard = Reference(sharding.state_shardings(target.params, run.mesh),
                              sharding.state_shardings(target.rest, run.mesh))
            target = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                                  target, shard)
        return ckpt.restore(path, target)
    ref = make_reference(state, dtype, run.mesh)
    ckpt.save(path, ref, force=True)
    ckpt.wait_until_finished()
    return ref


def _compile(run, model: Ling):
    cfg = run.cfg
    graphdef, state = init_state(model, cfg.train)
    if cfg.rl.prompts_per_step % run.processes:
        raise ValueError(f"config.rl.prompts_per_step={cfg.rl.prompts_per_step} must split evenly "
                         f"over {run.processes} processes")
    n_rows = cfg.rl.prompts_per_step // run.processes * cfg.sampler.group_size
    localized = None if CREDIT[cfg.rl.method] is None else (
        [np.ones(1)] * n_rows, [np.zeros(1, bool)] * n_rows)
    example = batches.rl_batch([[0]] * n_rows, [np.zeros(1, np.int32)] * n_rows, [np.zeros(1)] * n_rows,
                               np.zeros(n_rows), np.ones(n_rows, bool), localized, cfg.seq_len, 0)
    if uses_reference(cfg.train):
        example["ref_logp"] = np.zeros_like(example["old_logp"])
    state, step_fn = compile_train_step(graphdef, cfg.train, state, example, run.mesh,
                                        temperature=cfg.sampler.temperature)
    return graphdef, state, step_fn, example


def run_rl(run, model: Ling, first: int) -> Ling:
    """RL steps `first` .. sft.steps + rl.steps - 1 (global numbering)."""
    cfg = run.cfg
    graphdef, state, step_fn, example = _compile(run, model)
    start, end = cfg.sft.steps, cfg.sft.steps + cfg.rl.steps
    resumed = first > start or (first == start and run.ckpt.latest() == start)
    if resumed:
        state = run.restore(first, state)
    elif is_abstract(state):
        raise RuntimeError(f"no checkpoint at step {first} to restore the RL stage from")
    else:
        run.save(start, state, force=True)
    ref = ref_fn = None
    if uses_reference(cfg.train):
        ref = _reference(run, state, resumed, at_start=first == start)
        ref_fn = compile_reference_logprobs(graphdef, ref, example, run.mesh,
                                            chunk=cfg.train.logprob_chunk,
                                            temperature=cfg.sampler.temperature,
                                            micro_batches=cfg.train.micro_batches)
    stream = PromptStream(run.data.train_source, cfg.data.seed + 1, run.meta["stream"], keep=run.fits)
    rng = jax.random.PRNGKey(run.meta["rng"])
    bar = run.bar(cfg.rl.steps, first - start, "rl")
    bugs = testbed_bugs(run.data.tasks)  # the tasks do not change during the run
    from rcca_jax.train.evaluation import evaluate

    for step in range(first, end):
        _profile(run, step - start)
        run.yield_cpu()  # XLA may have started threads since the last step
        state, metrics, scored = rl_step(run, graphdef, state, step_fn, ref_fn, ref, stream,
                                         jax.random.fold_in(rng, step), bugs)
        run.meta["stream"] = stream.state()
        run.log_step(step, metrics, bar)
        for rec in scored.records[:cfg.log.sample_apps] if run.process == 0 else ():
            run.log.text(step, "sample_app", rec.get("response", "")[:4000])
        done = step + 1 - start
        run.save(step + 1, state, force=step + 1 == end)
        if cfg.export.every_steps and done % cfg.export.every_steps == 0 and step + 1 < end:
            run.export(run.model_of(graphdef, state), f"step_{step + 1}")
        if cfg.eval.every_steps and done % cfg.eval.every_steps == 0 and step + 1 < end:
            evaluate(run, run.model_of(graphdef, state), f"rl_step_{step + 1}", step + 1)
    if bar is not None:
        bar.close()
    return run.model_of(graphdef, state)


def _profile(run, rl_step_index: int) -> None:
    lc = run.cfg.log
    if lc.profile_start < 0:
        return
    if rl_step_index == lc.profile_start:
        jax.profiler.start_trace(str(run.workdir / "profile"))
    if rl_step_index == lc.profile_start + lc.profile_steps:
        jax.profiler.stop_trace()
