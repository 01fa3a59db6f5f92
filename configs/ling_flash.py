"""Ling-3.0-Flash: post-train the released checkpoint (124B total, 5.1B active per token).

Run (on a TPU v5p pod, every worker; `launch/tpu_v5p.sh` does this):
  python -m rcca_jax.launch --config=configs/ling_flash.py --workdir=runs/ling_flash \
    --config.model.init_from=gs://BUCKET/Ling-3.0-Flash \
    --config.data.source=shared/data/interactscience/tasks.jsonl \
    --config.data.sft_source=shared/data/interactscience/answers/claude-sonnet-4-20250514.jsonl
`init_from` is a released-format folder (safetensors + index, config.json, tokenizer files with
a chat template, generation_config.json), local or gs://; the architecture, tokenizer, chat
template and EOS ids are the checkpoint's. `data.source` is any tasks.jsonl in our format; 10% of
it (by a hash of the task id) is held out for evaluation, or give `--config.data.eval_source`.
SFT answers are filtered by our own evaluator (gated reward >= 0.5: rejection-sampled SFT).
Evaluate an export alone: `python -m rcca_jax.evaluate --config=configs/ling_flash.py
--checkpoint=runs/ling_flash/export/final --config.data.source=...`.

Variant `configs/ling_flash.py:mini`: exactly this code path at toy size, on 8 CPU devices
(data 2 x fsdp 2 x expert 2) with capacity dispatch; `init_from` a tiny `bailing_hybrid`
checkpoint (tests/train/test_ling_flash_mini.py writes one with transformers).

Plan the slice without a TPU (the real weighted-GRPO step with its KL reference):
  python -m rcca_jax.tools.aot --config=configs/ling_flash.py --topology=search
Measured (XLA's memory analysis, per chip, scanned layers): on a v5p-256 (4x4x8, fsdp16 x
expert8) the KL reference pass peaks at 22.4 GB and the train step at 73.5 GB (args 14.4, temps
56.7): it fits 95 GB. On a v5p-128 (4x4x4) the train step needs 110.0 GB (101.7 GB at seq_len
8192): it does not fit, so this config needs a v5p-256.
Expected figures (rcca_jax.models.param_counts): 124.41B parameters, 5.10B active per token
(embedding lookup excluded), 10.2 GFLOP/token forward.
"""

import ml_collections

from rcca_jax.train.config import complete


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    cfg = ml_collections.ConfigDict()
    cfg.seed = 0
    # The architecture comes from the checkpoint's config.json; only how to compute is set here.
    cfg.model = ml_collections.ConfigDict({
        "init_from": "",
        "dtype": "bfloat16",
        "param_dtype": "float32",
        # GShard capacity dispatch: XLA plans the all-to-all. The dropless path's
        # all_to_all sends every token to every expert shard (XLA:CPU has no
        # ragged all-to-all to test a tighter one), which does not fit on v5p.
        "moe_dispatch": "capacity",
        "capacity_factor": 1.25,
        "remat": True,
    })
    cfg.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": -1, "expert": 8, "tensor": 1})
    # InteractScience prompts are 6-14k characters (about 2-4k tokens), answers up to 28k.
    cfg.seq_len = 12288
    cfg.data = ml_collections.ConfigDict({"source": "", "eval_fraction": 0.1, "eval_source": "",
                                          "sft_source": "", "sft_min_reward": 0.5, "seed": 0})
    cfg.sft = ml_collections.ConfigDict({"steps": 0, "batch_size": 64, "learning_rate": 1e-5,
                                         "warmup_steps": 20})
    # 32 prompts x 8 samples = 256 sequences per step; one per chip per micro-batch on 32 chips.
    cfg.train = ml_collections.ConfigDict({"learning_rate": 1e-6, "lr_schedule": "constant",
                                           "warmup_steps": 10, "micro_batches": 8,
                                           "logprob_chunk": 512, "kl_coef": 1e-3,
                                           "kl_estimator": "k3"})
    cfg.sampler = ml_collections.ConfigDict({"max_new_tokens": 8192, "temperature": 1.0,
                                             "group_size": 8})
    cfg.rl = ml_collections.ConfigDict({"steps": 200, "prompts_per_step": 32, "method": "rcca",
                                        "reward": "gated", "localization": "grounded",
                                        "updates_per_step": 1, "prompts_per_sample": 4})
    cfg.eval = ml_collections.ConfigDict({"max_tasks": 0, "samples": 4, "every_steps": 50,
                                          "after_sft": True})
    # Per host: a v5p host has 208 vCPUs; about 4 pages per core for the evaluator's share.
    cfg.evaluator = ml_collections.ConfigDict({"backend": "local", "workers": 16, "scoring": {
        "browser": {"pages_per_worker": 8, "probe_time_limit_ms": 30000}}})
    cfg.checkpoint = ml_collections.ConfigDict({"every_steps": 25, "max_to_keep": 2})
    cfg.export = ml_collections.ConfigDict({"every_steps": 100, "dtype": ""})
    cfg.log = ml_collections.ConfigDict({"every_steps": 1, "sample_apps": 1})
    if arg == "mini":
        _mini(cfg)
    elif arg:
        raise ValueError(f"configs/ling_flash.py: unknown variant {arg!r} (mini)")
    return complete(cfg)  # every field settable on the command line


def _mini(cfg: ml_collections.ConfigDict) -> None:
    """Toy sizes only: every choice of the real run (capacity dispatch, remat, KL reference,
    micro-batches, rejection-sampled SFT from a responses file, held-out eval, export) stays."""
    cfg.model.update({"dtype": "float32", "kda_chunk_size": 16, "attn_block": 64,
                      "moe_group_size": 64, "capacity_factor": 2.0})
    cfg.mesh = ml_collections.ConfigDict({"data": 2, "fsdp": 2, "expert": 2, "tensor": 1})
    cfg.seq_len = 448  # task-family prompts <= 146 and answers <= 253 tokens with a 512-token BPE
    cfg.data.update({"eval_fraction": 0.25})
    cfg.sft.update({"steps": 4, "batch_size": 8, "learning_rate": 3e-3, "warmup_steps": 2})
    cfg.train.update({"learning_rate": 1e-4, "micro_batches": 2, "logprob_chunk": 64})
    cfg.sampler.update({"max_new_tokens": 256, "temperature": 0.7, "group_size": 4})
    cfg.rl.update({"steps": 2, "prompts_per_step": 4, "prompts_per_sample": 1})
    cfg.eval.update({"max_tasks": 4, "samples": 2, "every_steps": 0})
    cfg.evaluator.workers = 1
    cfg.evaluator.scoring.browser.update({"pages_per_worker": 4, "probe_time_limit_ms": 10000})
    cfg.checkpoint.update({"every_steps": 1, "max_to_keep": 3})
    cfg.export.update({"every_steps": 0})
