"""Hugging Face checkpoints <-> NNX state, streamed tensor by tensor.

Name mapping (released Ling-3.0 / `save_pretrained` names; our NNX paths).
Linear weights are stored [out, in] there and [in, out] here (transposed):

  model.word_embeddings.weight                   embed_tokens                [V, D]
  lm_head.weight                                 lm_head                     [D, V]  T
  model.norm.weight                              norm.weight
  model.layers.{i}.input_layernorm.weight        layers.{i}.input_layernorm.weight
  model.layers.{i}.post_attention_layernorm.weight  layers.{i}.post_attention_layernorm.weight
  model.layers.{i}.attention.{p}.weight          layers.{i}.attn.{p}.kernel  T  (p: q_proj, k_proj,
      v_proj, f_proj, b_proj, g_proj, kv_a_proj_with_mqa, kv_b_proj; `dense` -> o_proj)
  model.layers.{i}.attention.{q,k,v}_conv1d.weight  layers.{i}.attn.{q,k,v}_conv  [HK, 1, W] -> [W, HK]
  model.layers.{i}.attention.{A_log,dt_bias}     layers.{i}.attn.{A_log,dt_bias}
  model.layers.{i}.attention.{o_norm,kv_a_layernorm}.weight  layers.{i}.attn.{...}.weight
  model.layers.{i}.mlp.{gate,up,down}_proj.weight   layers.{i}.mlp.{...}.kernel  T  (dense MLP)
  model.layers.{i}.mlp.gate.weight               layers.{i}.mlp.router.kernel  T
  model.layers.{i}.mlp.gate.expert_bias          layers.{i}.mlp.expert_bias
  model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight  layers.{i}.mlp.w_{gate,up,down}[e]  T
  model.layers.{i}.mlp.shared_experts.{p}.weight layers.{i}.mlp.shared_experts.{p}.kernel  T

MTP module j (0-based; built when `cfg.mtp`) is checkpoint layer L = num_layers + j:

  model.layers.{L}.enorm.weight                  mtp_layers.{j}.enorm.weight     [D]
  model.layers.{L}.hnorm.weight                  mtp_layers.{j}.hnorm.weight     [D]
  model.layers.{L}.eh_proj.weight                mtp_layers.{j}.eh_proj.kernel   [D, 2D] -> [2D, D]  T
  model.layers.{L}.final_layernorm.weight        mtp_layers.{j}.final_layernorm.weight  [D]
  model.layers.{L}.{rest}                        mtp_layers.{j}.block.{...}  (an MLA + MoE layer:
      every name of a normal layer above, with i = L)

With `cfg.scan_layers`, the scanned layers' parameters are stacked by group
(rcca_jax.models.stack): `layer_groups.{j}.{rest}` [N, ...] has at row g the
tensor of layer i = prefix + g * period + j, named as `layers.{i}.{rest}` above;
loading reads each layer's tensor into its row, export writes each row under its
layer's name, so a checkpoint does not depend on the layout.

The word embedding and the LM head are shared with the main model. Without
`cfg.mtp`, tensors of layers >= num_hidden_layers are skipped when the config
declares MTP layers (num_nextn_predict_layers > 0). Any other unknown or
missing name is an error that lists them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, SingleDeviceSharding

from rcca_jax.models.config import LingConfig
from rcca_jax.models.model import Ling
from rcca_jax.models.safetensors_io import SafetensorsFile, save_file
from rcca_jax.models.stack import GROUPS, layer_split, layer_view, source_paths
from rcca_jax.sharding import state_shardings

# Kept in float32 whatever the model dtype (as the reference does).
FP32_PARAMS = ("A_log", "dt_bias", "q_conv", "k_conv", "v_conv", "expert_bias")
_ATTN_RENAME = {"o_proj": "dense"}
_MLP_EXPERT = {"w_gate": "gate_proj", "w_up": "up_proj", "w_down": "down_proj"}


class CheckpointError(ValueError):
    pass


def hf_names(path: tuple, cfg: LingConfig) -> tuple[list[str], str]:
    """HF tensor name(s) for one NNX path, and the transform kind.

    Kinds: "id", "T" (2-D transpose), "conv" ([C, 1, W] -> [W, C]),
    "experts" (stack of E [out, in] tensors -> [E, in, out]).
    """
    if path == ("embed_tokens",):
        return ["model.word_embeddings.weight"], "id"
    if path == ("lm_head",):
        return ["lm_head.weight"], "T"
    if path == ("norm", "weight"):
        return ["model.norm.weight"], "id"
    if path[0] == "layers" and len(path) > 2:
        return _layer_names(f"model.layers.{path[1]}.", path[2:], path, cfg)
    if path[0] == "mtp_layers" and len(path) > 3:
        pre = f"model.layers.{cfg.num_layers + path[1]}."
        if path[2] in ("enorm", "hnorm", "final_layernorm"):
            return [pre + f"{path[2]}.weight"], "id"
        if path[2] == "eh_proj":
            return [pre + "eh_proj.weight"], "T"
        if path[2] == "block":
            return _layer_names(pre, path[3:], path, cfg)
    raise CheckpointError(f"no checkpoint name for parameter {'.'.join(map(str, path))}")


def _layer_names(pre: str, rest: tuple, path: tuple, cfg: LingConfig) -> tuple[list[str], str]:
    """Names of a decoder layer's parameter `rest` under prefix `pre` ("model.layers.{i}.")."""
    if rest[0] in ("input_layernorm", "post_attention_layernorm"):
        return [pre + f"{rest[0]}.weight"], "id"
    if rest[0] == "attn":
        name = rest[1]
        if name in ("q_conv", "k_conv", "v_conv"):
            return [pre + f"attention.{name}1d.weight"], "conv"
        if name in ("A_log", "dt_bias"):
            return [pre + f"attention.{name}"], "id"
        if name in ("o_norm", "kv_a_layernorm"):
            return [pre + f"attention.{name}.weight"], "id"
        hf = _ATTN_RENAME.get(name, name)
        if rest[2] == "bias":
            return [pre + f"attention.{hf}.bias"], "id"
        return [pre + f"attention.{hf}.weight"], "T"
    if rest[0] == "mlp":
        name = rest[1]
        if name == "router":
            return [pre + "mlp.gate.weight"], "T"
        if name == "expert_bias":
            return [pre + "mlp.gate.expert_bias"], "id"
        if name in _MLP_EXPERT:
            proj = _MLP_EXPERT[name]
            return [pre + f"mlp.experts.{e}.{proj}.weight" for e in range(cfg.num_experts)], "experts"
        if name == "shared_experts":
            return [pre + f"mlp.shared_experts.{rest[2]}.weight"], "T"
        return [pre + f"mlp.{name}.weight"], "T"
    raise CheckpointError(f"no checkpoint name for parameter {'.'.join(map(str, path))}")


def _transform(arrays: list[np.ndarray], kind: str) -> np.ndarray:
    if kind == "id":
        return arrays[0]
    if kind == "T":
        return arrays[0].T
    if kind == "conv":
        return arrays[0][:, 0, :].T
    return np.stack([a.T for a in arrays])


def _untransform(value: np.ndarray, kind: str, n: int) -> list[np.ndarray]:
    if kind == "id":
        return [value]
    if kind == "T":
        return [value.T]
    if kind == "conv":
        return [value.T[:, None, :]]
    return [value[e].T for e in range(n)]


class _Index:
    """Which file holds each tensor of a (possibly sharded) checkpoint."""

    def __init__(self, root: Path):
        idx = root / "model.safetensors.index.json"
        single = root / "model.safetensors"
        if idx.exists():
            try:
                weight_map = json.loads(idx.read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError) as e:
                raise CheckpointError(f"{idx}: not a safetensors index ({e})") from e
        elif single.exists():
            weight_map = {k: single.name for k in SafetensorsFile(single).keys()}
        else:
            raise CheckpointError(f"{root}: no model.safetensors or model.safetensors.index.json")
        self.root = root
        self.weight_map = weight_map
        self._files: dict[str, SafetensorsFile] = {}

    def get(self, name: str) -> np.ndarray:
        fname = self.weight_map[name]
        if fname not in self._files:
            self._files[fname] = SafetensorsFile(self.root / fname)
        return self._files[fname].get(name)


def _reader(index: _Index, names: list[str], kind: str, dtype) -> Callable:
    """A make_array_from_callback callback reading only the slice a device needs."""

    whole: list[np.ndarray] = []  # a non-expert tensor is transformed once, then sliced per device

    def read(idx: tuple) -> np.ndarray:
        if kind == "experts":
            sel = range(len(names))[idx[0]]
            block = _transform([index.get(names[e]) for e in sel], kind)
            return np.asarray(block[(slice(None),) + tuple(idx[1:])], dtype=dtype)
        if not whole:
            whole.append(np.asarray(_transform([index.get(n) for n in names], kind), dtype=dtype))
        return whole[0][idx]

    return read


def _stacked(readers: list[Callable]) -> Callable:
    """A callback for a stacked [N, ...] parameter from one reader per row (layer)."""

    def read(idx: tuple) -> np.ndarray:
        return np.stack([readers[g](idx[1:]) for g in range(len(readers))[idx[0]]])

    return read


def _check_shape(root: Path, index: _Index, names: list[str], kind: str, want: tuple, p: tuple) -> None:
    """Raises unless the first tensor of `names` fits a (per-layer) parameter of shape `want`."""
    first = index.get(names[0])
    want = want[1:] if kind == "experts" else want
    have = first.T.shape if kind in ("T", "experts") else (
        first[:, 0, :].T.shape if kind == "conv" else first.shape)
    if tuple(have) != tuple(want):
        raise CheckpointError(f"{root}: tensor {names[0]} has shape {tuple(first.shape)}, "
                              f"which does not fit parameter {'.'.join(map(str, p))} {want}")


def load_state(path: str | Path, cfg: LingConfig, mesh: Mesh | None = None):
    """Reads a checkpoint into (graphdef, state) of `Ling(cfg)`, placing each shard.

    Each parameter is one `make_array_from_callback`: every device reads only its
    slice (a stacked parameter's rows layer by layer), so the host holds at most one
    parameter's transformed tensors at a time.
    """
    root = Path(path)
    index = _Index(root)
    split = layer_split(cfg)
    abstract = nnx.eval_shape(lambda: Ling(cfg, nnx.Rngs(0)))
    graphdef, abs_state = nnx.split(abstract)
    shard_state = state_shardings(abs_state, mesh) if mesh is not None else None
    flat = nnx.to_flat_state(abs_state)
    shard_flat = dict(nnx.to_flat_state(shard_state)) if shard_state is not None else {}
    used: set[str] = set()
    missing: list[str] = []
    leaves = []
    for p, var in flat:
        per_layer = [hf_names(q, cfg) for q in source_paths(p, split)]  # one per row if stacked
        kind = per_layer[0][1]
        absent = [n for names, _ in per_layer for n in names if n not in index.weight_map]
        if absent:
            missing += absent
            leaves.append((p, var))
            continue
        for names, _ in per_layer:
            used.update(names)
        shape = tuple(var.get_value().shape)
        dtype = jnp.float32 if p[-1] in FP32_PARAMS else jnp.dtype(cfg.param_dtype)
        sharding = shard_flat[p].get_value() if p in shard_flat else SingleDeviceSharding(jax.devices()[0])
        stacked = p[0] == GROUPS
        for names, _ in per_layer:
            _check_shape(root, index, names, kind, shape[1:] if stacked else shape, p)
        readers = [_reader(index, names, kind, dtype) for names, _ in per_layer]
        read = _stacked(readers) if stacked else readers[0]
        leaves.append((p, var.replace(jax.make_array_from_callback(shape, sharding, read))))
    _check_names(root, cfg, index, used, missing)
    return graphdef, nnx.from_flat_state(leaves)


def _check_names(root: Path, cfg: LingConfig, index: _Index, used: set[str], missing: list[str]) -> None:
    """Raises listing missing and unknown tensors (a checkpoint's MTP ones may be skipped)."""
    unknown = sorted(set(index.weight_map) - used)
    mtp = {n for n in unknown if _layer_of(n) is not None and _layer_of(n) >= cfg.num_layers}
    if cfg.num_mtp_layers and not cfg.mtp:
        unknown = [n for n in unknown if n not in mtp]
    if missing or unknown:
        msg = [f"{root}: checkpoint does not match the config"]
        if missing:
            msg.append(f"missing tensors ({len(missing)}): " + ", ".join(missing[:50]))
        if unknown:
            msg.append(f"unknown tensors ({len(unknown)}): " + ", ".join(unknown[:50]))
        raise CheckpointError("; ".join(msg))


def _layer_of(name: str) -> int | None:
    m = re.match(r"model\.layers\.(\d+)\.", name)
    return int(m.group(1)) if m else None


def from_pretrained(path: str | Path, dtype=jnp.float32, mesh: Mesh | None = None,
                    **overrides) -> Ling:
    """Loads a `bailing_hybrid` checkpoint directory as a `Ling` model.

    Args:
      path: directory with config.json and safetensors (sharded with an index, or one file).
      dtype: parameter and activation dtype (A_log, dt_bias, conv taps and the
        expert bias stay float32).
      mesh: place each parameter with its sharding on this mesh; None = one device.
      **overrides: LingConfig fields to override (e.g. moe_dispatch="capacity",
        or mtp=True to build and load the checkpoint's MTP modules).
    """
    name = jnp.dtype(dtype).name
    cfg = LingConfig.from_pretrained(path, dtype=name, param_dtype=name, **overrides)
    graphdef, state = load_state(path, cfg, mesh)
    return nnx.merge(graphdef, state)


@jax.jit
def _row(x: jax.Array, g: jax.Array) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(x, g, keepdims=False)


def _host_value(x: jax.Array, row: int | None = None) -> np.ndarray:
    """The whole value of a (possibly multi-process) array, or of its row `row`, on
    every process. A row is cut on the devices, so only it is gathered."""
    if row is not None:
        x = _row(x, jnp.int32(row))
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(jax.device_get(x))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def save_pretrained(model: Ling, path: str | Path, max_shard_bytes: int = 2 << 30,
                    dtype=None, config_json: dict | None = None) -> None:
    """Writes `model` as a released-format checkpoint: config.json, shards, index.

    Tensors are gathered and written one shard at a time, so the host never holds more
    than a shard (a stacked parameter is gathered one layer's row at a time). On several processes every one must call this (each tensor is
    gathered collectively); process 0 writes.

    Args:
      model: the policy.
      path: the folder (created).
      max_shard_bytes: the largest shard file.
      dtype: tensor dtype of the checkpoint (None: as the parameters are); the weights
        the model keeps in float32 (`FP32_PARAMS`) stay float32.
      config_json: the config.json to write (e.g. the source checkpoint's, to keep fields
        this code does not model); default `cfg.to_hf_dict()`. Its dtype is set (under
        `dtype`, transformers 5's name, and under `torch_dtype` when it had that key).
    """
    cfg = model.cfg
    root = Path(path)
    writer = jax.process_index() == 0
    if writer:
        root.mkdir(parents=True, exist_ok=True)
    parts: list[list[str]] = []
    current: dict[str, np.ndarray] = {}
    size = 0

    def flush() -> None:
        nonlocal current, size
        if current and writer:
            save_file(current, root / f"part-{len(parts):05d}.tmp")
        if current:
            parts.append(sorted(current))
        current, size = {}, 0

    stored = None
    # The unrolled model's order and names, a stacked parameter row by row (layer by layer).
    for p, var, row in layer_view(nnx.state(model), layer_split(cfg)):
        names, kind = hf_names(p, cfg)
        value = _host_value(var.get_value(), row)
        if dtype is not None and np.issubdtype(value.dtype, np.floating) and p[-1] not in FP32_PARAMS:
            value = value.astype(jnp.dtype(dtype))
        if stored is None and p[-1] not in FP32_PARAMS:
            stored = value.dtype  # what config.json's torch_dtype reports
        for n, a in zip(names, _untransform(value, kind, len(names))):
            if size and size + a.nbytes > max_shard_bytes:
                flush()
            current[n] = np.ascontiguousarray(a)
            size += a.nbytes
    flush()
    if not writer:
        return
    weight_map, total = {}, 0
    for i, names in enumerate(parts):
        fname = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
        (root / f"part-{i:05d}.tmp").rename(root / fname)
        weight_map.update({n: fname for n in names})
        total += sum(SafetensorsFile(root / fname).nbytes(n) for n in names)
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    config = dict(cfg.to_hf_dict() if config_json is None else config_json)
    name = jnp.dtype(jnp.float32 if stored is None else stored).name
    config["dtype"] = name
    if "torch_dtype" in config:
        config["torch_dtype"] = name
    (root / "config.json").write_text(json.dumps(config, indent=2))
