"""Ling-3.0 (`bailing_hybrid`) model configuration and parameter counts.

`LingConfig` is the frozen dataclass the model code takes. It reads and writes
the Hugging Face `config.json` of a `bailing_hybrid` checkpoint, including the
attribute aliases that the released checkpoint uses (`num_experts`,
`num_experts_per_token`, `num_expert_group`, `moe_renormalize`, ...).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

LINEAR = "linear_attention"
FULL = "full_attention"
DENSE = "dense"
SPARSE = "sparse"

# Hugging Face attribute aliases: released-config name -> our field name.
_HF_ALIASES = {
    "num_experts": "num_experts",
    "num_local_experts": "num_experts",
    "num_experts_per_token": "num_experts_per_tok",
    "num_experts_per_tok": "num_experts_per_tok",
    "num_expert_group": "n_group",
    "n_group": "n_group",
    "moe_renormalize": "norm_topk_prob",
    "norm_topk_prob": "norm_topk_prob",
    "num_shared_experts": "n_shared_experts",
    "n_shared_experts": "n_shared_experts",
    "num_nextn_predict_layers": "num_mtp_layers",
    "num_mtp_layers": "num_mtp_layers",
    "short_conv_kernel_size": "conv_kernel",
    "linear_conv_kernel_dim": "conv_kernel",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
}
# Fields a run may choose freely for a checkpoint: how to compute, not what the weights are.
# Every other field is read from the checkpoint's config.json (`LingConfig.from_pretrained`).
RUNTIME_FIELDS = ("dtype", "param_dtype", "moe_dispatch", "capacity_factor", "moe_group_size",
                  "remat", "scan_layers", "mtp", "mtp_input_norm", "attn_block",
                  "kda_chunk_size", "initializer_range")
_HF_SAME = (
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "kv_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "topk_group", "first_k_dense_replace",
    "routed_scaling_factor", "layer_group_size", "kda_safe_gate", "kda_lower_bound",
    "rms_norm_eps", "rope_theta", "tie_word_embeddings", "eos_token_id", "pad_token_id",
    "attention_bias", "mtp_loss_scaling_factor",
)


@dataclasses.dataclass(frozen=True)
class LingConfig:
    """Architecture of a `bailing_hybrid` model (defaults: Ling-3.0-Flash).

    Dimension letters used in the model code: B batch, T time, S key positions,
    D model, H heads, K head dim, E experts, F ffn, V vocab, G expert groups,
    L latent (kv_lora_rank), R rope dim, C chunk, N scanned layer groups.
    """

    vocab_size: int = 157184
    hidden_size: int = 2560
    intermediate_size: int = 6144
    moe_intermediate_size: int = 768
    num_layers: int = 42
    num_heads: int = 32
    # MLA (full attention) layers.
    kv_lora_rank: int = 512
    qk_rope_head_dim: int = 64
    qk_nope_head_dim: int = 128
    v_head_dim: int = 128
    rope_theta: float = 6_000_000.0
    attention_bias: bool = False
    attn_block: int = 512  # queries per attention block (scores are [B, H, block, S])
    # KDA (linear attention) layers.
    linear_head_dim: int = 128
    conv_kernel: int = 4
    kda_safe_gate: bool = True
    kda_lower_bound: float = -5.0
    kda_chunk_size: int = 64
    # MoE.
    num_experts: int = 512
    num_experts_per_tok: int = 8
    n_group: int = 8
    topk_group: int = 4
    n_shared_experts: int = 1
    routed_scaling_factor: float = 2.5
    norm_topk_prob: bool = True
    first_k_dense_replace: int = 2
    # Layer pattern: the last layer of every group of `layer_group_size` is MLA.
    layer_group_size: int = 6
    layer_types: tuple[str, ...] | None = None
    mlp_layer_types: tuple[str, ...] | None = None
    # Multi-token prediction (DeepSeek-V3 style, rcca_jax.models.mtp): the checkpoint's
    # MTP modules are its layers num_layers .. num_layers + num_mtp_layers - 1.
    num_mtp_layers: int = 0
    mtp_loss_scaling_factor: float = 0.0  # SFT loss += factor * mean over depths of MTP CE
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    eos_token_id: int | tuple[int, ...] | None = 156895
    pad_token_id: int | None = 156892
    initializer_range: float = 0.02
    # Run-time choices (not part of the checkpoint).
    dtype: str = "float32"        # activations
    param_dtype: str = "float32"  # parameters
    moe_dispatch: str = "dropless"  # "dropless" (ragged_dot) or "capacity" (einsum)
    capacity_factor: float = 1.25
    moe_group_size: int = 1024  # tokens per capacity group ("capacity" dispatch)
    remat: bool = False
    # Run the repeating tail of the layer pattern as a scan over stacked layer groups, so
    # XLA compiles one group, not every layer (rcca_jax.models.stack); same results.
    scan_layers: bool = True
    mtp: bool = False  # build and train the MTP modules (else a checkpoint's are skipped)
    # MTP input: the main model's final-norm hidden states and each depth's
    # final_layernorm output (as sglang's Bailing NextN serving feeds them), or,
    # when False, the pre-norm residual streams.
    mtp_input_norm: bool = True

    def __post_init__(self):
        n = self.num_layers
        if self.layer_types is None:
            types = tuple(FULL if (i + 1) % self.layer_group_size == 0 else LINEAR for i in range(n))
            object.__setattr__(self, "layer_types", types)
        if self.mlp_layer_types is None:
            mlp = tuple(DENSE if i < self.first_k_dense_replace else SPARSE for i in range(n))
            object.__setattr__(self, "mlp_layer_types", mlp)
        object.__setattr__(self, "layer_types", tuple(self.layer_types))
        object.__setattr__(self, "mlp_layer_types", tuple(self.mlp_layer_types))
        problems = []
        if len(self.layer_types) != n or len(self.mlp_layer_types) != n:
            problems.append(f"layer_types/mlp_layer_types must have num_layers={n} entries")
        if set(self.layer_types) - {LINEAR, FULL}:
            problems.append(f"layer_types: unknown {sorted(set(self.layer_types) - {LINEAR, FULL})}")
        if set(self.mlp_layer_types) - {DENSE, SPARSE}:
            problems.append(f"mlp_layer_types: unknown {sorted(set(self.mlp_layer_types) - {DENSE, SPARSE})}")
        if self.num_experts % self.n_group:
            problems.append(f"num_experts={self.num_experts} not divisible by n_group={self.n_group}")
        if self.topk_group > self.n_group:
            problems.append(f"topk_group={self.topk_group} > n_group={self.n_group}")
        if self.num_experts_per_tok > self.num_experts // self.n_group * self.topk_group:
            problems.append("num_experts_per_tok exceeds the experts in the selected groups")
        if self.num_mtp_layers < 0:
            problems.append(f"num_mtp_layers={self.num_mtp_layers} must be >= 0")
        if self.mtp and self.num_mtp_layers < 1:
            problems.append("mtp=True needs num_mtp_layers > 0 (the number of MTP modules to build)")
        if self.moe_dispatch not in ("dropless", "capacity"):
            problems.append(f"moe_dispatch={self.moe_dispatch!r}: expected 'dropless' or 'capacity'")
        if problems:
            raise ValueError("LingConfig: " + "; ".join(problems))

    # -- derived -------------------------------------------------------------
    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def eos_ids(self) -> tuple[int, ...]:
        if self.eos_token_id is None:
            return ()
        if isinstance(self.eos_token_id, int):
            return (self.eos_token_id,)
        return tuple(self.eos_token_id)

    def replace(self, **kw) -> "LingConfig":
        return dataclasses.replace(self, **kw)

    # -- Hugging Face config.json ------------------------------------------
    @classmethod
    def from_hf_dict(cls, d: dict[str, Any], **overrides) -> "LingConfig":
        """Builds the config from a `bailing_hybrid` config.json dictionary."""
        if d.get("model_type", "bailing_hybrid") != "bailing_hybrid":
            raise ValueError(f"config.json: model_type={d.get('model_type')!r}, expected 'bailing_hybrid'")
        kw: dict[str, Any] = {}
        for key, field in _HF_ALIASES.items():
            if key in d:
                kw[field] = d[key]
        for key in _HF_SAME:
            if key in d:
                kw[key] = d[key]
        # The HF config overwrites `head_dim` with the rope dim; the KDA head dim is
        # `linear_head_dim` when present, else the original `head_dim`.
        kw["linear_head_dim"] = d.get("linear_head_dim", d.get("head_dim", cls.linear_head_dim))
        rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"config.json: rope_type={rope.get('rope_type')!r} is not supported "
                             "(only 'default' RoPE is implemented)")
        if "rope_theta" in rope:
            kw["rope_theta"] = rope["rope_theta"]
        for key in ("layer_types", "mlp_layer_types"):
            if d.get(key) is not None:
                kw[key] = tuple(d[key])
        if isinstance(kw.get("eos_token_id"), list):
            kw["eos_token_id"] = tuple(kw["eos_token_id"])
        if d.get("num_key_value_heads") not in (None, d.get("num_attention_heads")):
            raise ValueError("config.json: num_key_value_heads must equal num_attention_heads for MLA")
        kw.update(overrides)
        return cls(**kw)

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides) -> "LingConfig":
        p = Path(path) / "config.json"
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{p}: cannot read config: {e}") from e
        return cls.from_hf_dict(d, **overrides)

    def to_hf_dict(self) -> dict[str, Any]:
        """The config.json dictionary of this architecture (released-checkpoint names)."""
        return {
            "architectures": ["BailingHybridForCausalLM"],
            "model_type": "bailing_hybrid",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "moe_intermediate_size": self.moe_intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_heads,
            "kv_lora_rank": self.kv_lora_rank,
            "qk_rope_head_dim": self.qk_rope_head_dim,
            "qk_nope_head_dim": self.qk_nope_head_dim,
            "v_head_dim": self.v_head_dim,
            "head_dim": self.linear_head_dim,
            "linear_head_dim": self.linear_head_dim,
            "short_conv_kernel_size": self.conv_kernel,
            "kda_safe_gate": self.kda_safe_gate,
            "kda_lower_bound": self.kda_lower_bound,
            "num_experts": self.num_experts,
            "num_experts_per_token": self.num_experts_per_tok,
            "num_expert_group": self.n_group,
            "topk_group": self.topk_group,
            "num_shared_experts": self.n_shared_experts,
            "routed_scaling_factor": self.routed_scaling_factor,
            "moe_renormalize": self.norm_topk_prob,
            "first_k_dense_replace": self.first_k_dense_replace,
            "layer_group_size": self.layer_group_size,
            "layer_types": list(self.layer_types),
            "mlp_layer_types": list(self.mlp_layer_types),
            "num_nextn_predict_layers": self.num_mtp_layers,
            "mtp_loss_scaling_factor": self.mtp_loss_scaling_factor,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta},
            "tie_word_embeddings": self.tie_word_embeddings,
            "eos_token_id": list(self.eos_token_id) if isinstance(self.eos_token_id, tuple)
            else self.eos_token_id,
            "pad_token_id": self.pad_token_id,
            "attention_bias": self.attention_bias,
            "hidden_act": "silu",
        }


def _block_sizes(cfg: LingConfig) -> dict[str, int]:
    """Parameters of each building block of a layer."""
    d, hk = cfg.hidden_size, cfg.num_heads * cfg.linear_head_dim
    kda = 4 * d * hk + 3 * hk * cfg.conv_kernel + cfg.num_heads + hk + d * hk \
        + d * cfg.num_heads + cfg.linear_head_dim + hk * d
    mla = (d * cfg.num_heads * cfg.qk_head_dim + d * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
           + cfg.kv_lora_rank + cfg.kv_lora_rank * cfg.num_heads * (cfg.qk_nope_head_dim + cfg.v_head_dim)
           + cfg.num_heads * cfg.v_head_dim * d + d * cfg.num_heads)
    expert = 3 * d * cfg.moe_intermediate_size
    return {"kda": kda, "mla": mla, "dense_mlp": 3 * d * cfg.intermediate_size, "expert": expert,
            "moe_fixed": cfg.num_experts * d + cfg.num_experts + expert * cfg.n_shared_experts}


def param_counts(cfg: LingConfig) -> dict[str, int]:
    """Parameter counts: `total`, `active` per token, and their parts.

    `active` counts the weights one token is multiplied by: every dense weight,
    the router, the shared expert and `num_experts_per_tok` routed experts per
    MoE layer, and the LM head. The input embedding table is a lookup, not a
    matmul, so it is in `total` but not in `active` (the convention behind the
    released "5.1B active" figure).

    `total` and `active` are the main model's. `mtp` and `mtp_active` are the
    `num_mtp_layers` MTP modules' (norms, eh_proj, an MLA + MoE layer each;
    embedding and head are shared), present in a checkpoint that declares
    them and built only when `cfg.mtp`.
    """
    d, b = cfg.hidden_size, _block_sizes(cfg)
    total = active = 0
    for attn, mlp in zip(cfg.layer_types, cfg.mlp_layer_types):
        layer = (b["kda"] if attn == LINEAR else b["mla"]) + 2 * d
        total += layer
        active += layer
        if mlp == DENSE:
            total += b["dense_mlp"]
            active += b["dense_mlp"]
        else:
            total += b["moe_fixed"] + cfg.num_experts * b["expert"]
            active += b["moe_fixed"] + cfg.num_experts_per_tok * b["expert"]
    embed = cfg.vocab_size * d
    head = 0 if cfg.tie_word_embeddings else cfg.vocab_size * d
    total += embed + head + d
    active += head + d
    mtp_fixed = 3 * d + 2 * d * d + b["mla"] + 2 * d + b["moe_fixed"]
    return {"total": total, "active": active, "embedding": embed, "lm_head": head,
            "per_expert": b["expert"], "flops_per_token_fwd": 2 * active,
            "mtp": cfg.num_mtp_layers * (mtp_fixed + cfg.num_experts * b["expert"]),
            "mtp_active": cfg.num_mtp_layers * (mtp_fixed + cfg.num_experts_per_tok * b["expert"])}
