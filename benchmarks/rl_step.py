"""Train-step and sampler throughput on ling_tiny, and the cost of token weighting.

  python benchmarks/rl_step.py [--config=configs/ling_tiny.py] [--batch 16 --seq 256]

Prints one table: weighted-GRPO step tokens/s, plain-GRPO step tokens/s
(same batch without the weights array, so no weight transfer or multiply),
their difference (target: under 2%), sampler tokens/s, and the largest
difference between the sampler's log-probs and the train step's forward on
the same tokens. Steps are timed including the host-to-device batch transfer,
median over --steps after a warm-up.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from rcca_jax import configs  # noqa: E402
from rcca_jax.models import Ling  # noqa: E402
from rcca_jax.models.logprobs import token_logprobs  # noqa: E402
from rcca_jax.rl.sampler import SamplerConfig, sample  # noqa: E402
from rcca_jax.rl.train_step import TrainConfig, compile_train_step, init_state  # noqa: E402
from rcca_jax.train.priority import yield_cpu  # noqa: E402


def host_batch(vocab: int, b: int, t: int, weighted: bool) -> dict:
    rs = np.random.RandomState(0)
    batch = {
        "tokens": rs.randint(2, vocab, (b, t)).astype(np.int32),
        "loss_mask": np.arange(t)[None, :] >= t // 4 + np.zeros((b, 1), int),
        "old_logp": rs.uniform(-6, -1, (b, t)).astype(np.float32),
        "advantages": rs.normal(0, 1, b).astype(np.float32),
    }
    if weighted:
        batch["weights_base"] = rs.uniform(1, 4, (b, t)).astype(np.float32)
        batch["diagnosed"] = rs.uniform(0, 1, (b, t)) < 0.2
    return batch


def time_steps(model_cfg, train_cfg, batch, steps, nice=None):
    graphdef, state = init_state(Ling(model_cfg, nnx.Rngs(0)), train_cfg)
    state, fn = compile_train_step(graphdef, train_cfg, state, batch)
    state, m = fn(state, {k: jnp.asarray(v) for k, v in batch.items()})
    jax.block_until_ready(m)
    times = []
    for _ in range(steps):
        yield_cpu(nice)  # as the training loop does each step (evaluator.compute_nice)
        t0 = time.perf_counter()
        state, m = fn(state, {k: jnp.asarray(v) for k, v in batch.items()})
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/ling_tiny.py")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--new_tokens", type=int, default=128)
    ap.add_argument("--yield-cpu", type=int, default=None, metavar="NICE",
                    help="run XLA's threads at this niceness, as the training loop does "
                         "(evaluator.compute_nice); default: unchanged")
    args = ap.parse_args()
    cfg = configs.model_config(configs.load(args.config).model)
    tcfg = TrainConfig(learning_rate=1e-5)
    tokens = args.batch * args.seq
    # Interleave the two variants so drift in machine load hits both alike.
    w_times, p_times = [], []
    for _ in range(2):
        w_times += time_steps(cfg, tcfg, host_batch(cfg.vocab_size, args.batch, args.seq, True), args.steps // 2,
                              args.yield_cpu)
        p_times += time_steps(cfg, tcfg, host_batch(cfg.vocab_size, args.batch, args.seq, False), args.steps // 2,
                              args.yield_cpu)
    w, p = float(np.median(w_times)), float(np.median(p_times))

    model = Ling(cfg, nnx.Rngs(0))
    prompts = [list(range(2, 2 + 16))] * (args.batch // 4)
    scfg = SamplerConfig(max_new_tokens=args.new_tokens, temperature=1.0, group_size=4)
    yield_cpu(args.yield_cpu)
    out = sample(model, prompts, jax.random.PRNGKey(0), scfg)  # compile
    jax.block_until_ready(out)
    t0 = time.perf_counter()
    out = sample(model, prompts, jax.random.PRNGKey(1), scfg)
    jax.block_until_ready(out)
    s_secs = time.perf_counter() - t0
    generated = int(out.lengths.sum())
    rows = np.asarray(out.tokens)
    n = int(out.lengths[0])
    seq = np.concatenate([prompts[0], rows[0, :n]])[None]
    h, _, _ = model.hidden(jnp.asarray(seq[:, :-1], jnp.int32))
    lp, _ = token_logprobs(h, model.head_kernel(), jnp.asarray(seq[:, 1:], jnp.int32), 64)
    diff = float(np.abs(np.asarray(lp[0, -n:]) - np.asarray(out.logprobs[0, :n])).max())

    print(f"device: {jax.devices()[0].device_kind}; batch {args.batch}x{args.seq}")
    print("measure | value")
    print(f"weighted GRPO step | {w * 1e3:.1f} ms, {tokens / w:.0f} tokens/s")
    print(f"plain GRPO step (no weights) | {p * 1e3:.1f} ms, {tokens / p:.0f} tokens/s")
    print(f"weighting overhead | {100 * (w - p) / p:+.2f}% (target < 2%)")
    print(f"sampler ({len(prompts)}x{scfg.group_size} rollouts, {args.new_tokens} new) | "
          f"{generated / s_secs:.0f} tokens/s ({generated} tokens in {s_secs:.2f} s, incl. prefill)")
    print(f"sampler vs forward log-prob, max |diff| | {diff:.2e}")


if __name__ == "__main__":
    main()
