"""A tiny released-format `bailing_hybrid` checkpoint, written as a user's would be.

transformers' `save_pretrained` writes random weights (KDA + MLA + MoE layers, MTP off); a
byte-level BPE trained on task-family texts is saved beside them in the transformers format
with a chat template, and `generation_config.json` names the EOS id. Tasks and their reference
answers go to tasks.jsonl and refs.jsonl, as `python -m evaluators.tasks.family` writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

ARCH = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32, qk_rope_head_dim=16,
            qk_nope_head_dim=16, v_head_dim=16, head_dim=16, n_group=2, topk_group=1,
            num_experts_per_tok=2, num_local_experts=8, first_k_dense_replace=1,
            layer_group_size=2, n_shared_experts=1)


def write_tasks(root: Path, n: int = 24, seed: int = 3) -> tuple[Path, Path, list[dict]]:
    from evaluators.tasks import family as taskfamily

    tasks = taskfamily.generate(n, seed=seed)
    tasks_path, refs_path = root / "tasks.jsonl", root / "refs.jsonl"
    tasks_path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    refs_path.write_text("".join(json.dumps({"task_id": t["id"], "model": "reference",
                                             "response": taskfamily.reference_response(t)}) + "\n"
                                 for t in tasks))
    return tasks_path, refs_path, tasks


def write_checkpoint(folder: Path, tasks: list[dict], seed: int = 0, vocab_size: int = 512,
                     arch: dict | None = None) -> Path:
    """Writes the checkpoint folder; returns it."""
    import torch
    from transformers import BailingHybridConfig, BailingHybridForCausalLM

    from rcca_jax.data.tokenizer import train_tokenizer, training_texts

    tok = train_tokenizer(training_texts(tasks), vocab_size=vocab_size)
    torch.manual_seed(seed)
    cfg = BailingHybridConfig(**(arch or ARCH), vocab_size=vocab_size, num_mtp_layers=0,
                              pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                              initializer_range=0.05)
    model = BailingHybridForCausalLM(cfg).eval()
    model.save_pretrained(folder, max_shard_size="200KB")
    tok.save_pretrained(str(folder))
    (folder / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [tok.eos_token_id], "pad_token_id": tok.pad_token_id}))
    return folder
