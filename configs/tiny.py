"""tiny: the CPU demo. SFT warm-up on our task family, then RCCA with real Chromium.

Run (a fresh 2-core machine; this is the README's main-job command):
  python -m rcca_jax.launch --config=configs/tiny.py
Variants: `configs/tiny.py:grpo` (flat weights, gated reward) and `:smoke` (2 SFT + 2 RL steps).

Expected: finishes in under 15 minutes on 2 cores; the last line reads
`mean reward: sft=<x> rcca=<y>` with y > x.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    cfg = ml_collections.ConfigDict()
    cfg.seed = 0
    cfg.seq_len = 384  # prompts <= 97 and references <= 224 tokens (the task family)
    cfg.model = ml_collections.ConfigDict({
        "vocab_size": 1024, "hidden_size": 96, "intermediate_size": 192, "moe_intermediate_size": 48,
        "num_layers": 4, "num_heads": 4, "kv_lora_rank": 32, "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 16, "v_head_dim": 24, "linear_head_dim": 24, "num_experts": 8,
        "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
        "layer_group_size": 2, "kda_chunk_size": 64, "eos_token_id": 1, "pad_token_id": 0,
        "initializer_range": 0.02,
    })
    cfg.mesh = ml_collections.ConfigDict({"data": -1})
    cfg.data = ml_collections.ConfigDict({"source": "taskfamily", "num_tasks": 32, "seed": 0,
                                          "vocab_size": 1024})
    cfg.sft = ml_collections.ConfigDict({"steps": 100, "batch_size": 8, "learning_rate": 3e-3,
                                         "warmup_steps": 10})
    cfg.train = ml_collections.ConfigDict({"learning_rate": 2e-4, "logprob_chunk": 128})
    cfg.sampler = ml_collections.ConfigDict({"max_new_tokens": 256, "temperature": 1.0, "group_size": 4})
    cfg.rl = ml_collections.ConfigDict({"steps": 8, "prompts_per_step": 3, "method": "rcca",
                                        "localization": "grounded", "eval_prompts": 8})
    cfg.evaluator = ml_collections.ConfigDict({"backend": "local", "workers": 1, "pages_per_worker": 6,
                                               "probe_time_limit_ms": 10000})
    cfg.checkpoint = ml_collections.ConfigDict({"every_steps": 50, "max_to_keep": 2})
    cfg.log = ml_collections.ConfigDict({"every_steps": 1, "sample_apps": 1})
    if arg == "grpo":
        cfg.rl.method = "grpo"
    elif arg == "smoke":
        cfg.sft.steps, cfg.rl.steps, cfg.rl.eval_prompts = 2, 2, 2
        cfg.rl.prompts_per_step, cfg.sampler.group_size = 2, 2
        cfg.sampler.max_new_tokens = 32
        cfg.checkpoint.every_steps = 1
    elif arg:
        raise ValueError(f"configs/tiny.py: unknown variant {arg!r} (grpo, smoke)")
    return cfg
