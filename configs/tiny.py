"""tiny: the CPU demo. A scratch policy, SFT on our task family, then RCCA with real Chromium.

Run (a fresh 2-core machine; this is the README's main-job command):
  python -m rcca_jax.launch --config=configs/tiny.py
Variants: `configs/tiny.py:grpo` (flat weights, gated reward), `:smoke` (2 SFT + 2 RL steps)
and `:testbed` (half the SFT references carry one known local bug, `evaluators.tasks.bugs`: the
credit-assignment experiment of `benchmarks/replication.py`, whose `oracle` arm blames it).

The same path as a released model's (configs/ling_flash.py): `model.init_from="scratch"` first
writes a released-format checkpoint into `<workdir>/init` (random weights of the shape below, a
byte-level BPE trained on the training tasks, with a chat template), then loads it like any
other. A quarter of the generated tasks (by a hash of the task id) is held out: the last line,
`mean reward: sft=<x> (se <s>) rcca=<y> (se <s>); rcca-sft=<d> (se <s>, ...)`, is the mean gated
reward of `eval.samples` answers per held-out task at the sampling temperature, after SFT and
after RL, with the same keys both times; standard errors take the task as the unit.

Expected: finishes in under 15 minutes on 2 cores (see the README for the measured figures).
"""

import ml_collections

from rcca_jax.train.config import complete


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    cfg = ml_collections.ConfigDict()
    cfg.seed = 0
    cfg.seq_len = 384  # prompts <= 97 and references <= 224 tokens (the task family)
    cfg.model = ml_collections.ConfigDict({
        "init_from": "scratch",
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
    cfg.data = ml_collections.ConfigDict({"source": "taskfamily", "num_tasks": 48, "seed": 0,
                                          "eval_fraction": 0.25, "sft_source": "references"})
    cfg.sft = ml_collections.ConfigDict({"steps": 150, "batch_size": 8, "learning_rate": 3e-3,
                                         "warmup_steps": 10})
    # Weights rescaled to mean 1 per response (rl.loss.WEIGHT_NORMS): as given, the A < 0 rows'
    # larger weights make every update push probability off diagnosed tokens. With them and lr
    # 3e-4 the policy's entropy rose 7x in 15 steps and its batch reward fell (0.67 -> 0.35).
    cfg.train = ml_collections.ConfigDict({"learning_rate": 1e-4, "logprob_chunk": 128,
                                           "weight_norm": "row_mean"})
    # Temperature 0.7 (the one setting for sampling and the ratio): at 1.0 the tiny policy's
    # samples mostly fail the source gate, and a group of four rarely differs enough.
    cfg.sampler = ml_collections.ConfigDict({"max_new_tokens": 256, "temperature": 0.7, "group_size": 4})
    cfg.rl = ml_collections.ConfigDict({"steps": 14, "prompts_per_step": 3, "method": "rcca",
                                        "reward": "gated", "localization": "grounded",
                                        "updates_per_step": 2})
    # 4 answers per held-out task at the sampling temperature (what RL maximises).
    cfg.eval = ml_collections.ConfigDict({"max_tasks": 0, "samples": 4})
    # The family's apps are a few static elements: a 6 s probe limit is generous and bounds the
    # wait of a failing step. Evaluation is CPU-bound here (about 1 CPU-second per page, most of
    # it a fresh renderer process), so more pages than the default admission only adds
    # contention, and short action timeouts would turn CPU starvation into false failures.
    cfg.evaluator = ml_collections.ConfigDict({"backend": "local", "workers": 1, "scoring": {
        "browser": {"pages_per_worker": 8, "probe_time_limit_ms": 6000}}})
    cfg.checkpoint = ml_collections.ConfigDict({"every_steps": 50, "max_to_keep": 2})
    cfg.log = ml_collections.ConfigDict({"every_steps": 1, "sample_apps": 1})
    if arg == "grpo":
        cfg.rl.method = "grpo"
    elif arg == "testbed":
        cfg.data.sft_bug_fraction = 0.5
    elif arg == "smoke":
        cfg.sft.steps, cfg.rl.steps, cfg.eval.max_tasks = 2, 2, 2
        cfg.rl.prompts_per_step, cfg.sampler.group_size, cfg.eval.samples = 2, 2, 2
        cfg.sampler.max_new_tokens = 32
        cfg.checkpoint.every_steps = 1
    elif arg:
        raise ValueError(f"configs/tiny.py: unknown variant {arg!r} (grpo, smoke, testbed)")
    return complete(cfg)  # every field settable on the command line
