"""Plan a TPU v5p slice without a TPU: compile the real RL step ahead of time.

Uses libtpu (from `jax[tpu]`) and `jax.experimental.topologies` to compile, for
each candidate v5p topology, the two programs an RL step of a run config runs
on the accelerator:
  1. the KL reference's log-probs (`reference_logprobs`: a forward pass of the
     frozen reference policy, in `train.kl_ref_dtype`), when `train.kl_coef` > 0;
  2. the weighted-GRPO train step itself (`train_step`: micro-batched forward,
     backward and AdamW update of fp32 master weights, the run's dtype, remat,
     dispatch and chunked log-probs, with the KL term),
and reads XLA's memory analysis and FLOP estimate per chip. Each program's peak
is its arguments + temporaries + outputs not aliased to inputs, plus what stays
resident on the chip while it runs and is not its argument (the reference's
weights during the train step; the train state during the reference pass).

  python -m rcca_jax.tools.aot --config=configs/ling_flash.py --topology=v5p:2x4x4
  python -m rcca_jax.tools.aot --config=configs/ling_flash.py --topology=search

The architecture is the released model's (LingConfig's defaults) or, with
--init_from, a checkpoint's config.json. `search` tries slices from small to
large and stops at the first whose peak fits in --hbm_gb (95 GB on v5p).
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
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding

from rcca_jax import configs, sharding
from rcca_jax.models import Ling, LingConfig, param_counts
from rcca_jax.models.config import RUNTIME_FIELDS
from rcca_jax.rl import train_step as ts
from rcca_jax.state import state_shardings

SEARCH = ("v5p:2x2x4", "v5p:2x4x4", "v5p:4x4x4", "v5p:4x4x8", "v5p:4x8x8", "v5p:8x8x8")
GB = 1e9


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    argument_gb: float
    temp_gb: float
    output_gb: float
    alias_gb: float
    resident_gb: float  # on the chip during the program, not among its arguments
    tflops: float  # model FLOPs per chip (XLA's count sees a loop body once)
    compile_s: float

    @property
    def peak_gb(self) -> float:
        return self.argument_gb + self.temp_gb + self.output_gb - self.alias_gb + self.resident_gb


def mesh_for(chips: int, expert: int) -> dict[str, int]:
    """Experts over `expert` chips, everything else fully sharded (FSDP)."""
    expert = min(expert, chips)
    return {"data": 1, "fsdp": chips // expert, "expert": expert, "tensor": 1}


def _abstract(tree, shardings):
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), tree, shardings)


def _per_chip_gb(tree, n_chips: int) -> float:
    """Bytes per chip of a sharded tree of ShapeDtypeStructs."""
    total = 0.0
    for a in jax.tree.leaves(tree):
        shards = np.prod([a.sharding.mesh.shape[ax] for ax in _axes(a.sharding.spec)]) if a.sharding else 1
        total += np.prod(a.shape) * a.dtype.itemsize / shards
    return total / GB


def _axes(spec) -> list[str]:
    out = []
    for entry in spec:
        if entry is None:
            continue
        out += [entry] if isinstance(entry, str) else list(entry)
    return out


class OutOfMemory(Exception):
    """XLA refused to compile a program: its temporaries do not fit (that is an answer too)."""

    def __init__(self, program: str, temp_gb: str, compile_s: float):
        super().__init__(f"{program}: temporaries {temp_gb} GB")
        self.program, self.temp_gb, self.compile_s = program, temp_gb, compile_s
        self.compiled: list[Program] = []  # the programs of the step that did compile


def _measure(name: str, fn, args, resident_gb: float, tflops: float, **jit_kw) -> Program:
    t0 = time.perf_counter()
    try:
        compiled = jax.jit(fn, **jit_kw).lower(*args).compile()
    except Exception as e:  # noqa: BLE001 - re-raised unless it is XLA's out-of-HBM answer
        if "RESOURCE_EXHAUSTED" not in str(e):
            raise
        need = re.search(r"temporaries \(([\d.]+)G\)", str(e))
        raise OutOfMemory(name, need.group(1) if need else "?", time.perf_counter() - t0) from None
    secs = time.perf_counter() - t0
    mem = compiled.memory_analysis()
    return Program(name, mem.argument_size_in_bytes / GB, mem.temp_size_in_bytes / GB,
                   mem.output_size_in_bytes / GB, mem.alias_size_in_bytes / GB, resident_gb,
                   tflops, secs)


def _batch(rows: int, seq: int, mesh, kl: bool) -> dict:
    shapes = {"tokens": jnp.int32, "loss_mask": jnp.bool_, "old_logp": jnp.float32,
              "weights_base": jnp.float32, "diagnosed": jnp.bool_,
              **({"ref_logp": jnp.float32} if kl else {})}
    shard = NamedSharding(mesh, sharding.spec(("batch", None), mesh=mesh, shape=(rows, seq)))
    out = {k: jax.ShapeDtypeStruct((rows, seq), d, sharding=shard) for k, d in shapes.items()}
    out["advantages"] = jax.ShapeDtypeStruct((rows,), jnp.float32, sharding=NamedSharding(
        mesh, sharding.spec(("batch",), mesh=mesh, shape=(rows,))))
    return out


def plan(cfg: LingConfig, train: ts.TrainConfig, temperature: float, topology: str, expert: int,
         per_chip_batch: int, seq_len: int) -> tuple[dict, list[Program]]:
    """Compiles the RL step's programs for one topology; returns (mesh, programs)."""
    devices = jax.experimental.topologies.get_topology_desc(platform="tpu", topology_name=topology).devices
    mesh_shape = mesh_for(len(devices), expert)
    mesh = sharding.make_mesh(mesh_shape, devices)
    graphdef, state = ts.init_state(nnx.eval_shape(lambda: Ling(cfg, nnx.Rngs(0))), train)
    state = _abstract(state, state_shardings(state, mesh))
    rows = per_chip_batch * len(devices) * train.micro_batches
    kl = bool(train.kl_coef)
    batch = _batch(rows, seq_len, mesh, kl)
    b_shard = jax.tree.map(lambda a: a.sharding, batch)
    s_shard = jax.tree.map(lambda a: a.sharding, state)
    state_gb = _per_chip_gb(state, len(devices))
    programs = []
    ref_gb = 0.0
    # Model FLOPs per chip: XLA's cost analysis counts a scanned layer group or micro-batch
    # loop body once, so it cannot be read as the step's work. Attention and remat's recompute
    # are left out (2 x active parameters per token forward, 3x that forward and backward).
    fwd_tflops = param_counts(cfg)["flops_per_token_fwd"] * per_chip_batch * train.micro_batches * seq_len / 1e12
    if kl:
        dtype = jnp.dtype(train.kl_ref_dtype or cfg.dtype)
        ref = jax.eval_shape(lambda s: ts.make_reference(s, dtype), state)
        r_shard = ts.Reference(sharding.state_shardings(ref.params, mesh), sharding.state_shardings(ref.rest, mesh))
        ref = _abstract(ref, r_shard)
        ref_gb = _per_chip_gb(ref, len(devices))

        def ref_step(r, b):
            with sharding.use_mesh(mesh):
                return ts.reference_logprobs(graphdef, r, b, chunk=train.logprob_chunk,
                                             temperature=temperature,
                                             micro_batches=train.micro_batches)

        programs.append(_measure("reference log-probs", ref_step, (ref, batch), state_gb, fwd_tflops,
                                 out_shardings=b_shard["tokens"]))

    def step(s, b):
        with sharding.use_mesh(mesh):
            return ts.train_step(graphdef, train, s, b, temperature=temperature)

    try:
        programs.append(_measure("train step", step, (state, batch), ref_gb, 3 * fwd_tflops,
                                 out_shardings=(s_shard, None), donate_argnums=0))
    except OutOfMemory as e:
        e.compiled = programs
        raise
    return mesh_shape, programs


def _row(topo: str, chips, mesh, p: Program, hbm_gb: float) -> str:
    return (f"{topo} | {chips} | {mesh} | {p.name} | {p.argument_gb:.1f} | {p.temp_gb:.1f} | "
            f"{p.output_gb:.1f} | {p.alias_gb:.1f} | {p.resident_gb:.1f} | {p.peak_gb:.1f} | "
            f"{p.tflops:.1f} | {p.compile_s:.0f} | {'yes' if p.peak_gb <= hbm_gb else 'no'}")


def model_config(cd, init_from: str | None) -> LingConfig:
    fields = {k: v for k, v in configs._plain(cd.model).items() if k in RUNTIME_FIELDS}
    if init_from:
        return LingConfig.from_pretrained(init_from, **fields)
    return configs.model_config(fields)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="configs/x.py[:arg]")
    ap.add_argument("--init_from", default=None, help="a checkpoint folder whose config.json to plan")
    ap.add_argument("--topology", default="search", help="e.g. v5p:4x4x4, or 'search'")
    ap.add_argument("--expert", type=int, default=8, help="expert-parallel width")
    ap.add_argument("--per_chip_batch", type=int, default=1, help="sequences per chip per micro-batch")
    ap.add_argument("--seq_len", type=int, default=None, help="default: the config's seq_len")
    ap.add_argument("--hbm_gb", type=float, default=95.0)
    args = ap.parse_args(argv)
    cd = configs.load(args.config)
    cfg = model_config(cd, args.init_from)
    train = ts.TrainConfig(**configs._plain(cd.get("train", {})))
    temperature = float(cd.get("sampler", {}).get("temperature", 1.0))
    seq = args.seq_len or int(cd.get("seq_len", 4096))
    counts = param_counts(cfg)
    print(f"model: {counts['total'] / 1e9:.2f}B parameters, {counts['active'] / 1e9:.2f}B active; "
          f"seq_len {seq}, {args.per_chip_batch} sequence(s) per chip x {train.micro_batches} "
          f"micro-batches; KL reference {'on' if train.kl_coef else 'off'}")
    print("topology | chips | mesh | program | args GB | temp GB | out GB | alias GB | resident GB "
          "| peak GB | model TFLOP/chip | compile s | fits")
    for topo in (SEARCH if args.topology == "search" else (args.topology,)):
        try:
            mesh, programs = plan(cfg, train, temperature, topo, args.expert, args.per_chip_batch, seq)
        except OutOfMemory as e:
            for p in e.compiled:
                print(_row(topo, "-", "-", p, args.hbm_gb), flush=True)
            print(f"{topo} | - | - | {e.program} | - | {e.temp_gb} (XLA: out of HBM) | - | - | - | - "
                  f"| - | {e.compile_s:.0f} | no", flush=True)
            continue
        chips = int(np.prod(list(mesh.values())))
        fits = all(p.peak_gb <= args.hbm_gb for p in programs)
        m = "x".join(f"{k}{v}" for k, v in mesh.items() if v > 1)
        for p in programs:
            print(_row(topo, chips, m, p, args.hbm_gb), flush=True)
        if fits and args.topology == "search":
            print(f"smallest slice that fits: {topo} ({chips} chips)")
            return


if __name__ == "__main__":
    main()
