"""Plan a TPU v5p slice without a TPU: compile the training step ahead of time.

Uses libtpu (from `jax[tpu]`) and `jax.experimental.topologies` to compile a
full training step (forward, backward, AdamW update; fp32 master weights and
optimizer moments, bf16 activations, per-layer remat) for each candidate v5p
topology, and reads XLA's memory analysis and FLOP estimate per chip.

  python -m rcca_jax.tools.aot --config=configs/ling_flash.py --topology=v5p:4x4x4
  python -m rcca_jax.tools.aot --config=configs/ling_flash.py --topology=search

`search` tries slices from small to large and stops at the first whose
per-chip total (arguments + temporaries + outputs not aliased to inputs) fits
in --hbm_gb (95 GB on v5p, leaving headroom under its 95.74 GiB).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import time

# No TPU VM here: keep libtpu from querying the GCE metadata server for one.
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

import jax
import jax.experimental.topologies
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from rcca_jax import configs, sharding
from rcca_jax.models import Ling, LingConfig, param_counts
from rcca_jax.models.logprobs import token_logprobs

SEARCH = ("v5p:2x2x4", "v5p:2x4x4", "v5p:4x4x4", "v5p:4x4x8", "v5p:4x8x8", "v5p:8x8x8")


@dataclasses.dataclass(frozen=True)
class Plan:
    topology: str
    chips: int
    mesh: dict
    tokens_per_step: int
    argument_gb: float
    temp_gb: float
    output_gb: float
    alias_gb: float
    total_gb: float
    tflops_per_chip: float
    compile_s: float


def mesh_for(chips: int, expert: int) -> dict[str, int]:
    """Experts over `expert` chips, everything else fully sharded (FSDP)."""
    expert = min(expert, chips)
    return {"data": 1, "fsdp": chips // expert, "expert": expert, "tensor": 1}


def _abstract(tree, shardings):
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), tree, shardings)


def compile_step(cfg: LingConfig, topology: str, expert: int, per_chip_batch: int, seq_len: int) -> Plan:
    topo = jax.experimental.topologies.get_topology_desc(platform="tpu", topology_name=topology)
    devices = topo.devices
    mesh_shape = mesh_for(len(devices), expert)
    mesh = sharding.make_mesh(mesh_shape, devices)
    model = nnx.eval_shape(lambda: Ling(cfg, nnx.Rngs(0)))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    opt = optax.adamw(1e-6, weight_decay=0.0)
    opt_state = jax.eval_shape(opt.init, params)
    p_shard = sharding.state_shardings(params, mesh)
    r_shard = sharding.state_shardings(rest, mesh)
    is_state = lambda x: isinstance(x, nnx.State)  # noqa: E731
    # Adam moments mirror the parameter tree (with its axes); counts are replicated.
    o_shard = jax.tree.map(
        lambda x: sharding.state_shardings(x, mesh) if is_state(x) else NamedSharding(mesh, P()),
        opt_state, is_leaf=is_state)
    batch = per_chip_batch * len(devices)
    tok_shard = NamedSharding(mesh, sharding.spec(("batch", None), mesh=mesh))

    def step(params, rest, opt_state, tokens):
        def loss_fn(params):
            m = nnx.merge(graphdef, params, rest)
            h, _, _ = m.hidden(tokens[:, :-1])
            logp, _ = token_logprobs(h, m.head_kernel(), tokens[:, 1:])
            return -jnp.mean(logp)

        with sharding.use_mesh(mesh):
            loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    args = (_abstract(params, p_shard), _abstract(rest, r_shard), _abstract(opt_state, o_shard),
            jax.ShapeDtypeStruct((batch, seq_len + 1), jnp.int32, sharding=tok_shard))
    t0 = time.perf_counter()
    jitted = jax.jit(step, out_shardings=(p_shard, o_shard, NamedSharding(mesh, P())),
                     donate_argnums=(0, 2))
    compiled = jitted.lower(*args).compile()
    secs = time.perf_counter() - t0
    mem = compiled.memory_analysis()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    gb = 1e9
    total = (mem.argument_size_in_bytes + mem.temp_size_in_bytes + mem.output_size_in_bytes
             - mem.alias_size_in_bytes)
    return Plan(topology, len(devices), mesh_shape, batch * seq_len, mem.argument_size_in_bytes / gb,
                mem.temp_size_in_bytes / gb, mem.output_size_in_bytes / gb, mem.alias_size_in_bytes / gb,
                total / gb, float(cost.get("flops", 0.0)) / 1e12, secs)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="configs/x.py[:arg]")
    ap.add_argument("--topology", default="search", help="e.g. v5p:4x4x4, or 'search'")
    ap.add_argument("--expert", type=int, default=8, help="expert-parallel width")
    ap.add_argument("--per_chip_batch", type=int, default=1, help="sequences per chip per micro-step")
    ap.add_argument("--seq_len", type=int, default=None, help="default: the config's seq_len")
    ap.add_argument("--hbm_gb", type=float, default=95.0)
    args = ap.parse_args(argv)
    cd = configs.load(args.config)
    cfg = configs.model_config(cd.model)
    seq = args.seq_len or int(cd.get("seq_len", 4096))
    counts = param_counts(cfg)
    print(f"model: {counts['total'] / 1e9:.2f}B parameters, {counts['active'] / 1e9:.2f}B active; "
          f"seq_len {seq}, {args.per_chip_batch} sequence(s) per chip")
    header = ("topology", "chips", "mesh", "args GB", "temp GB", "out GB", "alias GB", "total GB",
              "TFLOP/chip/step", "compile s", "fits")
    print(" | ".join(header))
    for topo in (SEARCH if args.topology == "search" else (args.topology,)):
        try:
            plan = compile_step(cfg, topo, args.expert, args.per_chip_batch, seq)
        except Exception as e:  # XLA refuses to compile what cannot fit; that is an answer too
            need = re.search(r"temporaries \(([\d.]+)G\)", str(e))
            if "RESOURCE_EXHAUSTED" not in str(e):
                raise
            print(f"{topo} | - | - | - | {need.group(1) if need else '?'} (XLA: out of HBM) | - | - | - | - | - | no",
                  flush=True)
            continue
        fits = plan.total_gb <= args.hbm_gb
        mesh = "x".join(f"{k}{v}" for k, v in plan.mesh.items() if v > 1)
        print(f"{plan.topology} | {plan.chips} | {mesh} | {plan.argument_gb:.1f} | {plan.temp_gb:.1f} | "
              f"{plan.output_gb:.1f} | {plan.alias_gb:.1f} | {plan.total_gb:.1f} | "
              f"{plan.tflops_per_chip:.1f} | {plan.compile_s:.0f} | {'yes' if fits else 'no'}", flush=True)
        if fits and args.topology == "search":
            print(f"smallest slice that fits: {plan.topology} ({plan.chips} chips)")
            return


if __name__ == "__main__":
    main()
