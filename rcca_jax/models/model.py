"""`bailing_hybrid` causal LM (Ling-3.0) in Flax NNX.

`Ling(cfg, rngs)(tokens [B, T]) -> logits [B, T, V]`. For training, use
`hidden()` and compute log-probs in chunks from `head_kernel()` so the full
[B, T, V] logits never exist at once. For decoding, `init_cache()` then
`step()`: MLA layers keep (c, k_rot) per slot, KDA layers their conv inputs
and [H, K, V] state. With `cfg.scan_layers` (the default) the repeating layer
groups are stacked and scanned (rcca_jax.models.stack): `layers` holds the
unrolled prefix, `layer_groups` the stacked group positions. With `cfg.mtp`, the model also owns the multi-token
prediction modules (`mtp_layers`, see rcca_jax.models.mtp): `hidden_with_mtp()`
returns the main and the MTP hidden states from one trunk pass,
`mtp_logits()` their logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import FULL, LingConfig
from rcca_jax.models.decoder import DecoderLayer, layer_call
from rcca_jax.models.layers import RMSNorm, dtype_of, embed_lookup, param
from rcca_jax.models.mtp import MTPLayer, mtp_forward
from rcca_jax.models.stack import layer_split, scan_groups, stack_modules

__all__ = ["DecoderLayer", "Ling"]


class Ling(nnx.Module):
    """BailingHybridForCausalLM."""

    def __init__(self, cfg: LingConfig, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed_tokens = param(rngs, (cfg.vocab_size, cfg.hidden_size), ("vocab", "embed"), cfg)
        # Every layer is built in order (the same initial weights whatever the layout), then
        # the scanned ones are stacked by group position.
        split = layer_split(cfg)
        layers = [DecoderLayer(cfg, i, rngs) for i in range(cfg.num_layers)]
        self.layers = nnx.List(layers[:split.prefix])
        self.layer_groups = nnx.List([stack_modules(layers[split.prefix + j::split.period])
                                      for j in range(split.period)]) if split.groups else None
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, cfg)
        self.lm_head = None if cfg.tie_word_embeddings else \
            param(rngs, (cfg.hidden_size, cfg.vocab_size), ("embed", "vocab"), cfg)
        self.mtp_layers = nnx.List([MTPLayer(cfg, rngs) for _ in range(cfg.num_mtp_layers)]) \
            if cfg.mtp else None

    def head_kernel(self) -> jax.Array:
        """LM head [D, V]."""
        if self.lm_head is None:
            return self.embed_tokens[...].T
        return self.lm_head[...]

    def trunk(self, tokens: jax.Array, positions: jax.Array | None = None,
              mask: jax.Array | None = None, cache: dict | None = None):
        """Hidden states of the last layer, before the final norm.

        Args:
          tokens: int32 [B, T].
          positions: int32 [B, T] RoPE positions; default: slot index.
          mask: bool [B, T], False on padding tokens (left padding for
            batched prompts); None = all valid.
          cache: from `init_cache`, or None for a cache-free forward.
        Returns:
          (x [B, T, D], new cache or None, aux) with aux["expert_load"]
          [L_moe, E] and aux["positions"] [B, T].
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
        x = embed_lookup(self.embed_tokens[...], tokens, dtype_of(cfg.dtype))  # [B, T, D]
        new_layers, loads = [], []
        call = layer_call(cfg)
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache["layers"][i]
            x, layer_cache, load = call(layer, x, positions, mask, key_mask, layer_cache, index)
            new_layers.append(layer_cache)
            if load is not None:
                loads.append(load)
        loads = jnp.stack(loads) if loads else jnp.zeros((0, cfg.num_experts), jnp.float32)
        new_groups = None
        if self.layer_groups is not None:
            x, new_groups, group_loads = scan_groups(
                self.layer_groups, cfg, x, positions, mask, key_mask,
                None if cache is None else cache["groups"], index)
            loads = jnp.concatenate([loads, group_loads])  # the groups follow the prefix
        new_cache = None
        if cache is not None:
            new_cache = {"index": index + t, "mask": key_mask, "layers": new_layers,
                         "groups": new_groups}
        return x, new_cache, {"expert_load": loads, "positions": positions}

    def hidden(self, tokens: jax.Array, positions: jax.Array | None = None,
               mask: jax.Array | None = None, cache: dict | None = None):
        """Final-norm hidden states: (h [B, T, D], new cache or None, aux).

        Arguments and aux as `trunk` (aux["expert_load"] [L_moe, E]).
        """
        x, new_cache, aux = self.trunk(tokens, positions, mask, cache)
        return self.norm(x), new_cache, aux

    def hidden_with_mtp(self, tokens: jax.Array, positions: jax.Array | None = None,
                        mask: jax.Array | None = None):
        """Main and MTP hidden states from one trunk pass (cache-free; needs `cfg.mtp`).

        Depth k's state at position t predicts token t + k + 1 of `tokens`
        (the main model's predicts t + 1); see rcca_jax.models.mtp.

        Args: as `trunk`, without a cache.
        Returns:
          (h [B, T, D], [h^k [B, T-k, D] for k = 1..num_mtp_layers], aux) with
          aux["expert_load"] [L_moe, E] (main model) and
          aux["mtp_expert_load"] [num_mtp_layers, E]. All hidden states are
          final-norm: multiply by `head_kernel()` for logits.
        """
        if self.mtp_layers is None:
            raise ValueError("hidden_with_mtp needs a model built with LingConfig(mtp=True)")
        x, _, aux = self.trunk(tokens, positions, mask)
        h = self.norm(x)
        h0 = h if self.cfg.mtp_input_norm else x
        hs, loads = mtp_forward(self.mtp_layers, self.cfg, self.embed_tokens[...], tokens, h0,
                                aux["positions"], mask)
        return h, hs, dict(aux, mtp_expert_load=loads)

    def mtp_logits(self, tokens: jax.Array, positions: jax.Array | None = None,
                   mask: jax.Array | None = None) -> tuple[jax.Array, list[jax.Array]]:
        """(logits [B, T, V], [MTP logits [B, T-k, V] for k = 1..N]), float32.

        The full logits are materialised: for tests and small inputs; training
        uses `hidden_with_mtp` and chunked log-probs.
        """
        h, hs, _ = self.hidden_with_mtp(tokens, positions, mask)
        return self._logits(h), [self._logits(hk) for hk in hs]

    def _logits(self, h: jax.Array) -> jax.Array:
        return jnp.einsum("btd,dv->btv", h, self.head_kernel().astype(h.dtype)).astype(jnp.float32)

    def __call__(self, tokens: jax.Array, positions: jax.Array | None = None,
                 mask: jax.Array | None = None) -> jax.Array:
        """Logits [B, T, V] (float32) for int32 tokens [B, T]."""
        h, _, _ = self.hidden(tokens, positions, mask)
        return self._logits(h)

    def init_cache(self, batch: int, max_len: int, dtype=None) -> dict:
        """An empty decoding cache for `batch` sequences of up to `max_len` tokens.

        "layers" holds one cache per unrolled layer, "groups" one per group position
        with a leading [N] axis (None without scanned groups).
        """
        cfg = self.cfg
        dtype = dtype_of(cfg.dtype) if dtype is None else dtype
        split = layer_split(cfg)

        def one(i: int, lead: tuple) -> dict:
            return _layer_cache(cfg, cfg.layer_types[i], lead, max_len, dtype)

        groups = [one(split.layer(j, 0), (split.groups, batch)) for j in range(split.period)]
        return {"index": jnp.zeros((), jnp.int32), "mask": jnp.zeros((batch, max_len), bool),
                "layers": [one(i, (batch,)) for i in range(split.prefix)],
                "groups": groups if split.groups else None}

    def step(self, tokens: jax.Array, cache: dict, positions: jax.Array | None = None,
             mask: jax.Array | None = None):
        """Runs tokens [B, T] through the cache: (logits [B, T, V] float32, new cache)."""
        h, cache, _ = self.hidden(tokens, positions, mask, cache)
        return self._logits(h), cache


def _layer_cache(cfg: LingConfig, kind: str, lead: tuple, max_len: int, dtype) -> dict:
    """One layer's empty cache; `lead` is (B,) or (N, B) for a stacked group position."""
    if kind == FULL:
        return {"c": jnp.zeros((*lead, max_len, cfg.kv_lora_rank), dtype),
                "k_rot": jnp.zeros((*lead, max_len, cfg.qk_rope_head_dim), dtype)}
    conv = jnp.zeros((*lead, cfg.conv_kernel - 1, cfg.num_heads * cfg.linear_head_dim), dtype)
    return {"conv": (conv, conv, conv),
            "state": jnp.zeros((*lead, cfg.num_heads, cfg.linear_head_dim, cfg.linear_head_dim),
                               jnp.float32)}
