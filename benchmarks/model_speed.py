"""Policy forward+backward throughput (tokens/s) and model FLOP utilisation.

  python benchmarks/model_speed.py --config=configs/ling_tiny.py            # CPU
  python benchmarks/model_speed.py --config=configs/ling_tiny.py:1b --peak_tflops=989  # a GPU

`:1b` swaps in a ~1B-active member of the same architecture (for a lent
GPU). MFU = 6 x active parameters x tokens/s (+ attention) / peak FLOP/s; on
CPU no peak is known, so MFU is left out unless --peak_tflops is given.
The AOT memory plan for ling_flash on v5p is `python -m rcca_jax.tools.aot`.

`--num_layers` deepens the config (its layer pattern continued) and
`--scan_layers=false` runs every layer unrolled, to compare the compile time of the
two layouts (rcca_jax.models.stack); "layout" is the unrolled prefix + groups x period:

  python benchmarks/model_speed.py --config=configs/ling_tiny.py --num_layers=24 --scan_layers=false
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
from rcca_jax.models import Ling, param_counts  # noqa: E402
from rcca_jax.models.logprobs import token_logprobs  # noqa: E402
from rcca_jax.models.stack import layer_split  # noqa: E402

ONE_B = dict(vocab_size=157184, hidden_size=1536, intermediate_size=4096, moe_intermediate_size=512,
             num_layers=12, num_heads=12, kv_lora_rank=256, qk_rope_head_dim=64, qk_nope_head_dim=64,
             v_head_dim=64, linear_head_dim=128, num_experts=64, num_experts_per_tok=8, n_group=8,
             topk_group=4, first_k_dense_replace=1, layer_group_size=6, dtype="bfloat16",
             param_dtype="float32", remat=True)


def bench(cfg, batch: int, seq: int, steps: int) -> dict:
    model = Ling(cfg, nnx.Rngs(0))
    toks = jnp.asarray(np.random.RandomState(0).randint(0, cfg.vocab_size, (batch, seq + 1)), jnp.int32)

    @nnx.jit
    def fwd_bwd(model, toks):
        def loss(model):
            h, _, _ = model.hidden(toks[:, :-1])
            logp, _ = token_logprobs(h, model.head_kernel(), toks[:, 1:])
            return -jnp.mean(logp)
        return nnx.value_and_grad(loss)(model)

    t0 = time.perf_counter()
    jax.block_until_ready(fwd_bwd(model, toks))
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        jax.block_until_ready(fwd_bwd(model, toks))
        times.append(time.perf_counter() - t0)
    step = float(np.median(times))
    return {"compile_s": compile_s, "step_s": step, "tokens_per_s": batch * seq / step}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/ling_tiny.py")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--peak_tflops", type=float, default=None, help="device peak for MFU")
    ap.add_argument("--num_layers", type=int, default=None, help="default: the config's")
    ap.add_argument("--scan_layers", default="true", choices=("true", "false"))
    args = ap.parse_args()
    path, _, variant = args.config.partition(":")
    cd = configs.load(path)
    model_cd = dict(cd.model) if variant != "1b" else ONE_B
    model_cd["scan_layers"] = args.scan_layers == "true"
    if args.num_layers:
        model_cd["num_layers"] = args.num_layers
    rows = []
    for dispatch in ("dropless", "capacity"):
        cfg = configs.model_config({**model_cd, "moe_dispatch": dispatch})
        counts = param_counts(cfg)
        r = bench(cfg, args.batch, args.seq, args.steps)
        split = layer_split(cfg)
        layout = f"{split.prefix} + {split.groups}x{split.period}" if split.groups else f"{split.prefix} unrolled"
        flops = 3 * (counts["flops_per_token_fwd"] + 0.0) * r["tokens_per_s"]
        mfu = f"{100 * flops / (args.peak_tflops * 1e12):.1f}%" if args.peak_tflops else "n/a"
        rows.append((dispatch, layout, f"{counts['total'] / 1e6:.1f}M", f"{counts['active'] / 1e6:.1f}M",
                     f"{args.batch}x{args.seq}", f"{r['compile_s']:.1f}", f"{r['step_s'] * 1e3:.1f}",
                     f"{r['tokens_per_s']:.0f}", mfu))
    print(f"device: {jax.devices()[0].device_kind} x{len(jax.devices())}")
    head = ("MoE path", "layout", "params", "active", "batch", "compile s", "step ms", "tokens/s", "MFU")
    print(" | ".join(head))
    for r in rows:
        print(" | ".join(r))


if __name__ == "__main__":
    main()
