"""One decoder layer of Ling-3.0: (MLA or KDA) attention, then a dense MLP or MoE."""

from __future__ import annotations

import jax
from flax import nnx

from rcca_jax.models.config import FULL, SPARSE, LingConfig
from rcca_jax.models.kda import KDA
from rcca_jax.models.layers import MLP, RMSNorm
from rcca_jax.models.mla import MLA
from rcca_jax.models.moe import MoE
from rcca_jax.sharding import constrain


class DecoderLayer(nnx.Module):
    """Pre-norm residual layer.

    Args:
      cfg: the model config.
      i: layer index, which picks the kinds from `cfg.layer_types` and
        `cfg.mlp_layer_types`; or None when `kinds` is given.
      rngs: parameter initialisation.
      kinds: (attention kind, MLP kind), e.g. (FULL, SPARSE) for an MTP block.
    """

    def __init__(self, cfg: LingConfig, i: int | None, rngs: nnx.Rngs,
                 kinds: tuple[str, str] | None = None):
        attn_kind, mlp_kind = kinds if kinds is not None else (cfg.layer_types[i], cfg.mlp_layer_types[i])
        self.is_mla = attn_kind == FULL
        self.is_moe = mlp_kind == SPARSE
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, cfg)
        self.attn = MLA(cfg, rngs) if self.is_mla else KDA(cfg, rngs)
        self.mlp = MoE(cfg, rngs) if self.is_moe else MLP(cfg.hidden_size, cfg.intermediate_size, cfg, rngs)

    def __call__(self, x, positions, mask, key_mask, cache, index):
        """x [B, T, D] -> (x [B, T, D], new cache, expert load [E] or None)."""
        h = self.input_layernorm(x)
        if self.is_mla:
            h, cache = self.attn(h, positions, key_mask, cache, index)
        else:
            h, cache = self.attn(h, mask, cache)
        x = constrain(x + h, ("batch", "seq", "act_embed"))
        h = self.post_attention_layernorm(x)
        load = None
        if self.is_moe:
            h, load = self.mlp(h)
        else:
            h = self.mlp(h)
        return constrain(x + h, ("batch", "seq", "act_embed")), cache, load


def remat_call(layer: DecoderLayer, *args):
    """A layer under jax.checkpoint: the backward pass keeps only its inputs.

    The layer is split into a pure function of its state (it mutates nothing),
    which works inside any outer transform, unlike nnx.remat's state tracking.
    """
    graphdef, state = nnx.split(layer)
    return jax.checkpoint(lambda st, *a: nnx.merge(graphdef, st)(*a))(state, *args)


def layer_call(cfg: LingConfig):
    """How to call a DecoderLayer: rematerialised when `cfg.remat`."""
    return remat_call if cfg.remat else DecoderLayer.__call__
