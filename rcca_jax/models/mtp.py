"""Multi-token prediction (MTP) modules of Ling-3.0, DeepSeek-V3 style.

MTP module k (1-based depth; checkpoint layer num_layers + k - 1) sees, at
position t, the previous depth's hidden state h^{k-1}_t and the embedding of
token t + k, and predicts token t + k + 1 through the shared LM head:

    x   = eh_proj([enorm(emb(token_{t+k})); hnorm(h^{k-1}_t)])   # embedding half first
    y   = DecoderLayer_MLA+MoE(x)                                  # causal over t
    h^k = final_layernorm(y);  logits^k = h^k @ head

so depth k covers positions 0 .. T-k-1 of a T-token input (T-k positions;
the last one predicts the token after the input, as the main model's last).

h^0 is the main model's final-norm hidden state, the one whose logits it
emits: that is what sglang's Bailing target model hands its NextN draft
module (its LogitsProcessor captures the normed states; Bailing passes no
pre-norm states). Depth k > 1 likewise gets h^{k-1} after final_layernorm.
`LingConfig.mtp_input_norm=False` feeds the pre-norm residual streams instead.
RoPE positions are those of h^{k-1}_t. The embedding table and LM head are the
main model's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import FULL, SPARSE, LingConfig
from rcca_jax.models.decoder import DecoderLayer, layer_call
from rcca_jax.models.layers import Linear, RMSNorm, dtype_of, embed_lookup
from rcca_jax.sharding import constrain


class MTPLayer(nnx.Module):
    """One MTP depth: enorm, hnorm, eh_proj, an MLA + MoE decoder layer, final_layernorm."""

    def __init__(self, cfg: LingConfig, rngs: nnx.Rngs):
        d = cfg.hidden_size
        self.enorm = RMSNorm(d, cfg.rms_norm_eps, cfg)
        self.hnorm = RMSNorm(d, cfg.rms_norm_eps, cfg)
        self.eh_proj = Linear(2 * d, d, ("concat_embed", "embed"), cfg, rngs)
        self.block = DecoderLayer(cfg, None, rngs, kinds=(FULL, SPARSE))
        self.final_layernorm = RMSNorm(d, cfg.rms_norm_eps, cfg)

    def __call__(self, h: jax.Array, emb: jax.Array, positions: jax.Array,
                 key_mask: jax.Array | None, call=DecoderLayer.__call__):
        """One depth over T' positions.

        Args:
          h: [B, T', D] previous depth's hidden states; emb: [B, T', D]
            embeddings of the tokens k ahead; positions: int32 [B, T'];
          key_mask: bool [B, T'] valid positions, or None; call: how to run
            the decoder layer (`decoder.layer_call`).
        Returns:
          (pre-norm y [B, T', D], final-norm h^k [B, T', D], expert load [E]).
        """
        x = jnp.concatenate([self.enorm(emb), self.hnorm(h.astype(emb.dtype))], axis=-1)  # [B, T', 2D]
        x = constrain(self.eh_proj(x), ("batch", "seq", "act_embed"))  # [B, T', D]
        y, _, load = call(self.block, x, positions, key_mask, key_mask, None, None)
        return y, self.final_layernorm(y), load


def mtp_forward(layers, cfg: LingConfig, table: jax.Array, tokens: jax.Array,
                h0: jax.Array, positions: jax.Array, mask: jax.Array | None):
    """Runs the MTP depths on top of the main model's hidden states.

    Args:
      layers: the MTPLayer modules, depth 1 first.
      cfg: the model config; table: embedding table [V, D].
      tokens: int32 [B, T] (the main model's input); h0: [B, T, D] main
        hidden states (final-norm or pre-norm, see `cfg.mtp_input_norm`).
      positions: int32 [B, T]; mask: bool [B, T] (False = padding) or None.
    Returns:
      ([h^k [B, T-k, D] final-norm, k = 1..N], expert loads [N, E]).
    """
    t = tokens.shape[1]
    call = layer_call(cfg)
    h, outs, loads = h0, [], []
    for k, layer in enumerate(layers, start=1):
        if t - k < 1:
            raise ValueError(f"MTP depth {k} needs more than {k} tokens, got T={t}")
        emb = embed_lookup(table, tokens[:, k:], dtype_of(cfg.dtype))  # [B, T-k, D]
        key_mask = None if mask is None else mask[:, :t - k] & mask[:, k:]
        y, hk, load = layer(h[:, :-1], emb, positions[:, :t - k], key_mask, call)
        outs.append(hk)
        loads.append(load)
        h = hk if cfg.mtp_input_norm else y
    return outs, jnp.stack(loads)
