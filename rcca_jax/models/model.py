"""`bailing_hybrid` causal LM (Ling-3.0) in Flax NNX.

`Ling(cfg, rngs)(tokens [B, T]) -> logits [B, T, V]`. For training, use
`hidden()` and compute log-probs in chunks from `head_kernel()` so the full
[B, T, V] logits never exist at once. For decoding, `init_cache()` then
`step()`: MLA layers keep (c, k_rot) per slot, KDA layers their conv inputs
and [H, K, V] state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import FULL, SPARSE, LingConfig
from rcca_jax.models.kda import KDA
from rcca_jax.models.layers import MLP, RMSNorm, dtype_of, embed_lookup, param
from rcca_jax.models.mla import MLA
from rcca_jax.models.moe import MoE
from rcca_jax.sharding import constrain


class DecoderLayer(nnx.Module):
    def __init__(self, cfg: LingConfig, i: int, rngs: nnx.Rngs):
        self.is_mla = cfg.layer_types[i] == FULL
        self.is_moe = cfg.mlp_layer_types[i] == SPARSE
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


def _remat_call(layer: DecoderLayer, *args):
    """A layer under jax.checkpoint: the backward pass keeps only its inputs.

    The layer is split into a pure function of its state (it mutates nothing),
    which works inside any outer transform, unlike nnx.remat's state tracking.
    """
    graphdef, state = nnx.split(layer)
    return jax.checkpoint(lambda st, *a: nnx.merge(graphdef, st)(*a))(state, *args)


class Ling(nnx.Module):
    """BailingHybridForCausalLM."""

    def __init__(self, cfg: LingConfig, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed_tokens = param(rngs, (cfg.vocab_size, cfg.hidden_size), ("vocab", "embed"), cfg)
        self.layers = nnx.List([DecoderLayer(cfg, i, rngs) for i in range(cfg.num_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, cfg)
        self.lm_head = None if cfg.tie_word_embeddings else \
            param(rngs, (cfg.hidden_size, cfg.vocab_size), ("embed", "vocab"), cfg)

    def head_kernel(self) -> jax.Array:
        """LM head [D, V]."""
        if self.lm_head is None:
            return self.embed_tokens[...].T
        return self.lm_head[...]

    def hidden(self, tokens: jax.Array, positions: jax.Array | None = None,
               mask: jax.Array | None = None, cache: dict | None = None):
        """Final-norm hidden states.

        Args:
          tokens: int32 [B, T].
          positions: int32 [B, T] RoPE positions; default: slot index.
          mask: bool [B, T], False on padding tokens (left padding for
            batched prompts); None = all valid.
          cache: from `init_cache`, or None for a cache-free forward.
        Returns:
          (h [B, T, D], new cache or None, aux) with aux["expert_load"] [L_moe, E].
        """
        cfg = self.cfg
        b, t = tokens.shape
        index = None if cache is None else cache["index"]
        if positions is None:
            base = 0 if cache is None else cache["index"]
            positions = jnp.broadcast_to(base + jnp.arange(t, dtype=jnp.int32), (b, t))
        key_mask = mask
        if cache is not None:
            valid = jnp.ones((b, t), bool) if mask is None else mask
            key_mask = jax.lax.dynamic_update_slice_in_dim(cache["mask"], valid, index, axis=1)
        x = embed_lookup(self.embed_tokens[...], tokens, dtype_of(cfg.dtype))
        new_layers, loads = [], []
        call = _remat_call if cfg.remat else DecoderLayer.__call__
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache["layers"][i]
            x, layer_cache, load = call(layer, x, positions, mask, key_mask, layer_cache, index)
            new_layers.append(layer_cache)
            if load is not None:
                loads.append(load)
        h = self.norm(x)
        new_cache = None
        if cache is not None:
            new_cache = {"index": index + t, "mask": key_mask, "layers": new_layers}
        aux = {"expert_load": jnp.stack(loads) if loads else jnp.zeros((0, cfg.num_experts))}
        return h, new_cache, aux

    def __call__(self, tokens: jax.Array, positions: jax.Array | None = None,
                 mask: jax.Array | None = None) -> jax.Array:
        """Logits [B, T, V] (float32) for int32 tokens [B, T]."""
        h, _, _ = self.hidden(tokens, positions, mask)
        return jnp.einsum("btd,dv->btv", h, self.head_kernel().astype(h.dtype)).astype(jnp.float32)

    def init_cache(self, batch: int, max_len: int, dtype=None) -> dict:
        """An empty decoding cache for `batch` sequences of up to `max_len` tokens."""
        cfg = self.cfg
        dtype = dtype_of(cfg.dtype) if dtype is None else dtype
        hk = cfg.num_heads * cfg.linear_head_dim
        layers = []
        for kind in cfg.layer_types:
            if kind == FULL:
                layers.append({"c": jnp.zeros((batch, max_len, cfg.kv_lora_rank), dtype),
                               "k_rot": jnp.zeros((batch, max_len, cfg.qk_rope_head_dim), dtype)})
            else:
                conv = jnp.zeros((batch, cfg.conv_kernel - 1, hk), dtype)
                layers.append({"conv": (conv, conv, conv),
                               "state": jnp.zeros((batch, cfg.num_heads, cfg.linear_head_dim,
                                                   cfg.linear_head_dim), jnp.float32)})
        return {"index": jnp.zeros((), jnp.int32), "mask": jnp.zeros((batch, max_len), bool),
                "layers": layers}

    def step(self, tokens: jax.Array, cache: dict, positions: jax.Array | None = None,
             mask: jax.Array | None = None):
        """Runs tokens [B, T] through the cache: (logits [B, T, V] float32, new cache)."""
        h, cache, _ = self.hidden(tokens, positions, mask, cache)
        logits = jnp.einsum("btd,dv->btv", h, self.head_kernel().astype(h.dtype))
        return logits.astype(jnp.float32), cache
