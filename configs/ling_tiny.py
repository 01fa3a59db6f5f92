"""ling_tiny: the Ling-3.0 architecture at CPU-test size (both layer kinds, MoE, groups).

A model-only config (tests, benchmarks); the CPU training demo is configs/tiny.py.
Benchmark:
  python benchmarks/model_speed.py --config=configs/ling_tiny.py

Expected figures: 0.8M parameters, 0.4M active per token; on 2 CPU cores (shared) forward+backward
of 8x256 tokens runs at about 840 tokens/s (dropless) and 1,300 tokens/s (capacity).
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    del arg
    cfg = ml_collections.ConfigDict()
    cfg.model = ml_collections.ConfigDict({
        "vocab_size": 512,
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_layers": 6,
        "num_heads": 4,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "linear_head_dim": 16,
        "num_experts": 16,
        "num_experts_per_tok": 4,
        "n_group": 4,
        "topk_group": 2,
        "first_k_dense_replace": 1,
        "layer_group_size": 3,
        "kda_chunk_size": 32,
        "eos_token_id": 1,
        "pad_token_id": 0,
        "dtype": "float32",
        "param_dtype": "float32",
    })
    cfg.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": -1, "expert": 1, "tensor": 1})
    cfg.seq_len = 256
    return cfg
