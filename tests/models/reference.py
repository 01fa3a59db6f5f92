"""Random tiny `bailing_hybrid` reference models from transformers, saved to disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Two architectures covering both layer kinds, first_k_dense, expert groups,
# shared experts and both forget-gate forms, and both layer layouts: "a" runs
# scanned (a prefix of 2 layers, then 2 scanned groups of 2), "b" unrolled (after
# its prefix of 3 the pattern repeats only once).
CONFIGS = {
    "a": dict(vocab_size=96, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
              num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=2, kv_lora_rank=16,
              qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=16, head_dim=16, n_group=2,
              topk_group=1, num_experts_per_tok=2, num_local_experts=8, first_k_dense_replace=1,
              layer_group_size=2, n_shared_experts=1),
    "b": dict(vocab_size=80, hidden_size=48, intermediate_size=64, moe_intermediate_size=24,
              num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=24,
              qk_rope_head_dim=8, v_head_dim=12, qk_nope_head_dim=8, head_dim=12, n_group=4,
              topk_group=2, num_experts_per_tok=4, num_local_experts=16, first_k_dense_replace=2,
              layer_group_size=3, n_shared_experts=2, short_conv_kernel_size=3,
              kda_safe_gate=False, routed_scaling_factor=1.5),
}


def build(name: str, seed: int = 0):
    """A random transformers BailingHybridForCausalLM with non-trivial norms and biases."""
    import torch
    from transformers import BailingHybridConfig, BailingHybridForCausalLM

    torch.manual_seed(seed)
    cfg = BailingHybridConfig(**CONFIGS[name], num_mtp_layers=0, pad_token_id=0, eos_token_id=1,
                              initializer_range=0.15)
    model = BailingHybridForCausalLM(cfg).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" in n:
                p.add_(0.2 * torch.randn_like(p))
        for mod in model.modules():
            if hasattr(mod, "e_score_correction_bias"):
                mod.e_score_correction_bias.normal_(0, 0.05)
    return model


def save(name: str, root: Path, seed: int = 0):
    """Builds reference `name` and writes it with `save_pretrained` (several shards)."""
    model = build(name, seed)
    path = root / f"ref-{name}-{seed}"
    model.save_pretrained(path, max_shard_size="200KB")
    return model, path


def tokens(vocab: int, shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    return np.random.RandomState(seed).randint(2, vocab, size=shape).astype(np.int32)
