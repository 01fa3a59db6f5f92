"""tiny: the CPU demo. SFT warm-up on our task family, then RCCA with real Chromium.

Run (a fresh 2-core machine; this is the README's main-job command):
  python -m rcca_jax.launch --config=configs/tiny.py
Variants: `configs/tiny.py:grpo` (flat weights, gated reward) and `:smoke` (2 SFT + 2 RL steps).

Expected: finishes in under 15 minutes on 2 cores; the last line reads
`mean reward: sft=<x> rcca=<y>`, y within about a tenth of x either way (32 samples of a nearly
memorised policy: the run shows the pipeline, not RCCA's gain). Measured (2 cores, nothing else
running): 6 min 3 s, `mean reward: sft=0.859 rcca=0.778`, the same on a fresh rerun (SFT 1 min
33 s; each of the 14 RL steps about 14 s, most of it Chromium scoring 12 apps); `:grpo` from
the same SFT: `rcca=0.747`; an earlier evaluator: 8 min 27 s, `sft=0.791 rcca=0.822`. "mean reward" is the gated reward of 4 samples per eval prompt
(8 prompts) at the sampling temperature, with the same key both times.
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
        # KDA chunks of 16: the per-chunk triangular solve is what costs on CPU (2.7x faster
        # fwd+bwd than 64 at this size); dropless MoE: sampler and trainer route identically.
        "layer_group_size": 2, "kda_chunk_size": 16, "eos_token_id": 1, "pad_token_id": 0,
        "initializer_range": 0.02,
    })
    cfg.mesh = ml_collections.ConfigDict({"data": -1})
    cfg.data = ml_collections.ConfigDict({"source": "taskfamily", "num_tasks": 32, "seed": 0,
                                          "vocab_size": 1024})
    cfg.sft = ml_collections.ConfigDict({"steps": 150, "batch_size": 8, "learning_rate": 3e-3,
                                         "warmup_steps": 10})
    # Weights rescaled to mean 1 per response (rl.loss.WEIGHT_NORMS): as given, the A < 0 rows'
    # larger weights make every update push probability off diagnosed tokens. With them and lr
    # 3e-4 the policy's entropy rose 7x in 15 steps and its batch reward fell (0.67 -> 0.35).
    cfg.train = ml_collections.ConfigDict({"learning_rate": 1e-4, "logprob_chunk": 128, "temperature": 0.7,
                                           "weight_norm": "row_mean"})
    # Temperature 0.7 (train and sampler must agree): at 1.0 the tiny policy's samples mostly
    # fail the source gate, and a group of four rarely differs enough to give an advantage.
    cfg.sampler = ml_collections.ConfigDict({"max_new_tokens": 256, "temperature": 0.7, "group_size": 4})
    # The demo's "mean reward" is that of 4 samples per eval prompt at the sampling temperature
    # (what RL maximises); greedy answers of the memorised SFT policy are near the ceiling.
    cfg.rl = ml_collections.ConfigDict({"steps": 14, "prompts_per_step": 3, "method": "rcca",
                                        "reward": "gated",
                                        "localization": "grounded", "eval_prompts": 8,
                                        "eval_samples": 4, "updates_per_step": 2})
    # The family's apps are a few static elements: a 6 s probe limit is generous and bounds the
    # wait of a failing step. Evaluation is CPU-bound here (about 1 CPU-second per page, most of
    # it a fresh renderer process), so more pages than the default admission only adds
    # contention, and short action timeouts would turn CPU starvation into false failures.
    cfg.evaluator = ml_collections.ConfigDict({"backend": "local", "workers": 1, "pages_per_worker": 8,
                                               "probe_time_limit_ms": 6000})
    cfg.checkpoint = ml_collections.ConfigDict({"every_steps": 50, "max_to_keep": 2})
    cfg.log = ml_collections.ConfigDict({"every_steps": 1, "sample_apps": 1})
    if arg == "grpo":
        cfg.rl.method = "grpo"
    elif arg == "smoke":
        cfg.sft.steps, cfg.rl.steps, cfg.rl.eval_prompts = 2, 2, 2
        cfg.rl.prompts_per_step, cfg.sampler.group_size, cfg.rl.eval_samples = 2, 2, 2
        cfg.sampler.max_new_tokens = 32
        cfg.checkpoint.every_steps = 1
    elif arg:
        raise ValueError(f"configs/tiny.py: unknown variant {arg!r} (grpo, smoke)")
    return cfg
