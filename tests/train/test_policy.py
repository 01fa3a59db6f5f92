"""Opening a released-format checkpoint for a run: architecture, tokenizer, chat template, EOS,
the errors that name a file and a field, and the export that transformers loads back."""

from __future__ import annotations

import json
import shutil

import jax.numpy as jnp
import numpy as np
import pytest

from rcca_jax.configs import ConfigError
from rcca_jax.models import CheckpointError
from rcca_jax.train.config import ModelConfig
from rcca_jax.train.policy import export, open_policy, write_scratch
from tests.train import mini

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy")
    _, _, tasks = mini.write_tasks(root, n=8)
    return mini.write_checkpoint(root / "ckpt", tasks), tasks


def copy(ckpt, tmp_path, edit=None):
    folder = tmp_path / "copy"
    shutil.copytree(ckpt, folder)
    if edit:
        edit(folder)
    return folder


def test_reads_the_checkpoint_and_applies_run_time_fields(ckpt):
    folder, tasks = ckpt
    p = open_policy(ModelConfig(str(folder), {"moe_dispatch": "capacity", "remat": True}), folder)
    hf = json.loads((folder / "config.json").read_text())
    assert p.config.hidden_size == hf["hidden_size"] and p.config.num_layers == hf["num_hidden_layers"]
    assert p.config.moe_dispatch == "capacity" and p.config.remat
    assert p.eos_ids == (1,) and p.turn_end == 1 and p.pad_id == 0
    text = p.prompt_text(tasks[0])
    assert text == f"### Request\n{tasks[0]['prompt']}\n### Response\n"  # the chat template's
    assert p.response_ids("<p>x</p>")[-1] == p.turn_end


def test_system_prompt_goes_through_the_template(ckpt):
    folder, tasks = ckpt
    p = open_policy(ModelConfig(str(folder)), folder)
    text = p.prompt_text({**tasks[0], "system": "Be brief."})
    assert text.startswith("### System\nBe brief.\n### Request\n")


def test_a_shape_override_is_an_error_naming_both_values(ckpt):
    folder, _ = ckpt
    with pytest.raises(ConfigError, match=r"config\.model\.hidden_size=128 differs from .*config\.json "
                                          r"\(hidden_size=64\)"):
        open_policy(ModelConfig(str(folder), {"hidden_size": 128}), folder)
    open_policy(ModelConfig(str(folder), {"hidden_size": 64}), folder)  # equal: no override


@pytest.mark.parametrize("edit, match", [
    (lambda f: [x.unlink() for x in f.glob("tokenizer*")], r"no tokenizer \(tokenizer\.json"),
    (lambda f: (f / "chat_template.jinja").unlink(), r"tokenizer_config\.json: field 'chat_template' missing"),
    (lambda f: (f / "config.json").write_text(json.dumps(
        {**json.loads((f / "config.json").read_text()), "vocab_size": 300})),
     r"the tokenizer has \d+ tokens but config\.json's vocab_size \(the embedding\) is 300"),
    (lambda f: (f / "generation_config.json").write_text('{"eos_token_id": [9999]}'),
     r"generation_config\.json: field 'eos_token_id' \[9999\] is outside the vocabulary"),
    (lambda f: (f / "config.json").write_text("{oops"), r"config\.json: not JSON"),
    (lambda f: [x.unlink() for x in f.glob("model*")], r"no model\.safetensors or model\.safetensors\.index\.json"),
], ids=["no-tokenizer", "no-chat-template", "vocab", "eos", "bad-config", "no-weights"])
def test_errors_name_the_file_and_field(ckpt, tmp_path, edit, match):
    folder = copy(ckpt[0], tmp_path, edit)
    with pytest.raises((CheckpointError, ConfigError), match=match):
        open_policy(ModelConfig(str(folder)), folder)


def test_missing_tensor_is_named(ckpt, tmp_path):
    def drop(f):
        index = json.loads((f / "model.safetensors.index.json").read_text())
        name = next(n for n in index["weight_map"] if n.endswith("attention.dense.weight"))
        del index["weight_map"][name]
        (f / "model.safetensors.index.json").write_text(json.dumps(index))

    folder = copy(ckpt[0], tmp_path, drop)
    p = open_policy(ModelConfig(str(folder)), folder)
    with pytest.raises(CheckpointError, match=r"missing tensors \(1\): model\.layers\.\d+\.attention\.dense\.weight"):
        p.load()


def test_export_is_served_by_transformers_with_the_same_logits(ckpt, tmp_path):
    from transformers import AutoTokenizer, BailingHybridForCausalLM

    folder, tasks = ckpt
    p = open_policy(ModelConfig(str(folder)), folder)
    dest = export(p.load(), p, tmp_path / "export")
    assert (dest / "chat_template.jinja").read_text() == (folder / "chat_template.jinja").read_text()
    assert json.loads((dest / "config.json").read_text())["dtype"] == "float32"
    toks = p.prompt_ids(tasks[1])[:20]
    with torch.no_grad():
        want = BailingHybridForCausalLM.from_pretrained(folder).eval()(torch.tensor([toks])).logits.numpy()
        got = BailingHybridForCausalLM.from_pretrained(dest).eval()(torch.tensor([toks])).logits.numpy()
    np.testing.assert_array_equal(got, want)  # the same float32 weights, bit for bit
    ours = np.asarray(open_policy(ModelConfig(str(dest)), dest).load()(jnp.asarray([toks])))
    np.testing.assert_allclose(ours, want, atol=1e-4)
    assert AutoTokenizer.from_pretrained(str(dest))(tasks[1]["prompt"])["input_ids"] == \
        p.tokenizer(tasks[1]["prompt"])["input_ids"]
    half = export(p.load(), p, tmp_path / "bf16", dtype="bfloat16")
    assert json.loads((half / "config.json").read_text())["dtype"] == "bfloat16"
    assert sum(f.stat().st_size for f in half.glob("*.safetensors")) < \
        0.6 * sum(f.stat().st_size for f in dest.glob("*.safetensors"))


def test_scratch_folder_is_a_released_format_checkpoint(ckpt, tmp_path):
    from rcca_jax.data.tokenizer import training_texts
    from rcca_jax.models import LingConfig

    _, tasks = ckpt
    shape = LingConfig(vocab_size=2048, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                       num_layers=2, num_heads=2, kv_lora_rank=16, qk_rope_head_dim=8,
                       qk_nope_head_dim=8, v_head_dim=8, linear_head_dim=8, num_experts=4,
                       num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1,
                       layer_group_size=2)
    write_scratch(tmp_path / "init", shape, training_texts(tasks), seed=0)
    p = open_policy(ModelConfig("scratch"), tmp_path / "init")
    assert p.config.vocab_size == len(p.tokenizer) < 2048  # the BPE's size on this small corpus
    assert p.turn_end == p.tokenizer.eos_token_id
    assert not (tmp_path / "init.tmp").exists()


def _fake_gcs(monkeypatch, bucket):
    """gs://bucket/... read from a local folder (no network here); every other path as is."""
    from etils import epath

    real = epath.Path
    monkeypatch.setattr(epath, "Path", lambda p: real(bucket / str(p)[len("gs://"):]
                                                      if str(p).startswith("gs://") else p))


def test_a_gs_checkpoint_is_copied_whole_once(tmp_path, monkeypatch):
    from rcca_jax.train.policy import localize_folder

    src = tmp_path / "bucket" / "runs" / "ling"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}")
    (src / "model.safetensors").write_bytes(b"w" * 1000)
    _fake_gcs(monkeypatch, tmp_path / "bucket")
    cache = tmp_path / "cache"
    dst = localize_folder("gs://runs/ling", cache)
    assert sorted(p.name for p in dst.iterdir()) == [".rcca-complete", "config.json", "model.safetensors"]
    assert (dst / "model.safetensors").read_bytes() == b"w" * 1000
    assert [p.name for p in cache.iterdir()] == [dst.name]  # no copy left half-way beside it
    (src / "model.safetensors").write_bytes(b"changed")
    assert localize_folder("gs://runs/ling", cache) == dst  # reused, not copied again
    assert (dst / "model.safetensors").read_bytes() == b"w" * 1000


def test_a_gs_copy_that_loses_the_race_keeps_the_winners(tmp_path, monkeypatch):
    """Another process sharing the cache renames its complete copy in while this one copies."""
    from rcca_jax.train import policy

    src = tmp_path / "bucket" / "ling"
    src.mkdir(parents=True)
    (src / "config.json").write_text('{"mine": false}')
    _fake_gcs(monkeypatch, tmp_path / "bucket")
    cache = tmp_path / "cache"
    winner = cache / "ling"
    real_mkdtemp = policy.tempfile.mkdtemp

    def mkdtemp(**kw):  # the other process finishes first
        winner.mkdir(parents=True)
        (winner / "config.json").write_text('{"mine": true}')
        (winner / ".rcca-complete").write_text("gs://ling")
        return real_mkdtemp(**kw)

    monkeypatch.setattr(policy.tempfile, "mkdtemp", mkdtemp)
    assert policy.localize_folder("gs://ling", cache) == winner
    assert (winner / "config.json").read_text() == '{"mine": true}'
    assert [p.name for p in cache.iterdir()] == ["ling"]


def test_an_incomplete_gs_copy_is_named_not_used(tmp_path, monkeypatch):
    from rcca_jax.train.policy import localize_folder

    (tmp_path / "bucket" / "ling").mkdir(parents=True)
    (tmp_path / "bucket" / "ling" / "config.json").write_text("{}")
    _fake_gcs(monkeypatch, tmp_path / "bucket")
    (tmp_path / "cache" / "ling").mkdir(parents=True)  # left by a copy that died part-way
    (tmp_path / "cache" / "ling" / "config.json").write_text("{")
    with pytest.raises(CheckpointError, match=r"cache/ling: an incomplete copy of gs://ling"):
        localize_folder("gs://ling", tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["ling"]
