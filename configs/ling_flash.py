"""Ling-3.0-Flash: the real policy (124B total, 5.1B active per token).

Run (on a TPU v5p pod, every worker):
  python -m rcca_jax.launch --config=configs/ling_flash.py --workdir=gs://BUCKET/run
Plan the slice without a TPU:
  python -m rcca_jax.tools.aot --config=configs/ling_flash.py --topology=v5p:2x4x4

Expected figures (rcca_jax.models.param_counts): 124.41B parameters, 5.10B
active per token (embedding lookup excluded), 10.2 GFLOP/token forward.
AOT plan (libtpu, XLA memory analysis, one 8192-token sequence per chip per
micro-step): v5p:2x4x4 (32 chips, fsdp 4 x expert 8) fits: 56.4 GB arguments
+ 24.3 GB temporaries = 80.7 GB per chip (outputs alias the donated state),
446.5 TFLOP per chip per step; 16 chips cannot hold fp32 weights + AdamW
moments (1.49 TB). Before blocked attention and grouped capacity dispatch the
same slice needed 100-350 GB of temporaries.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    del arg
    cfg = ml_collections.ConfigDict()
    # LingConfig fields; the defaults of LingConfig are the released model's.
    cfg.model = ml_collections.ConfigDict({
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
    cfg.seq_len = 8192
    cfg.batch_size = 256  # sequences per step (prompts x group)
    return cfg
