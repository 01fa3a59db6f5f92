"""The policy a run starts from: a released-format checkpoint folder, opened and checked.

A folder holds safetensors shards with their index, `config.json`, the tokenizer
files with a chat template, and `generation_config.json` (its EOS ids). The run
reads the architecture from `config.json` (the config file may change only how
to compute: `RUNTIME_FIELDS`), uses the checkpoint's own tokenizer and chat
template for prompts, stops sampling at its EOS ids, and exports the trained
policy in the same format (`export`), copying the tokenizer and generation files
unchanged, so transformers, vLLM or SGLang serve the export like the original.

`model.init_from="scratch"` writes such a folder first (`write_scratch`): random
weights of the configured shape and a byte-level BPE trained on the training
tasks, with a chat template. The tiny demo runs that way; from then on it is the
same path as a released model's.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import jax
from flax import nnx

from rcca_jax.configs import ConfigError
from rcca_jax.models import CheckpointError, Ling, LingConfig, save_pretrained
from rcca_jax.models.checkpoint import load_state
from rcca_jax.train.config import SCRATCH, ModelConfig, checkpoint_overrides

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
_SENTINEL = "\u2063rcca-response\u2063"  # a response text no template alters (invisible separator)


@dataclasses.dataclass
class Policy:
    """An opened checkpoint folder.

    Attributes:
      path: the local folder.
      config: the architecture (its config.json) with the run's run-time fields.
      tokenizer: the checkpoint's tokenizer (transformers `AutoTokenizer`).
      eos_ids: sampling stops at any of these (generation_config.json).
      turn_end: the id that ends an assistant turn under the chat template (one of
        `eos_ids`): SFT targets end with it, as sampled responses do.
      pad_id: padding id.
      source_config: config.json as read (an export writes it back, torch_dtype set).
    """

    path: Path
    config: LingConfig
    tokenizer: object
    eos_ids: tuple[int, ...]
    turn_end: int
    pad_id: int
    source_config: dict

    def messages(self, task: dict) -> list[dict]:
        out = [{"role": "system", "content": task["system"]}] if task.get("system") else []
        return out + [{"role": "user", "content": task["prompt"]}]

    def prompt_text(self, task: dict) -> str:
        """The task's prompt under the chat template, with the assistant's generation prompt."""
        return self.tokenizer.apply_chat_template(self.messages(task), tokenize=False,
                                                  add_generation_prompt=True)

    def prompt_ids(self, task: dict) -> list[int]:
        # The template already holds any special tokens the model expects.
        return list(self.tokenizer(self.prompt_text(task), add_special_tokens=False)["input_ids"])

    def response_ids(self, text: str) -> list[int]:
        """A response's ids as an SFT target: its tokens, then the turn's end."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + [self.turn_end]

    def load(self, mesh=None) -> Ling:
        """The weights, each parameter placed on `mesh` with its sharding (None: one device)."""
        graphdef, state = load_state(self.path, self.config, mesh)
        return nnx.merge(graphdef, state)


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing ({what})") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None


def _eos_ids(root: Path, config: dict, tokenizer) -> tuple[int, ...]:
    """EOS ids: generation_config.json's, else config.json's, else the tokenizer's."""
    gen_path = root / "generation_config.json"
    gen = _read_json(gen_path, "generation settings") if gen_path.exists() else {}
    for where, value in ((gen_path, gen.get("eos_token_id")),
                         (root / "config.json", config.get("eos_token_id")),
                         (root / "tokenizer_config.json", tokenizer.eos_token_id)):
        if value is not None:
            ids = tuple(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
            if not ids:
                raise CheckpointError(f"{where}: field 'eos_token_id' is empty")
            return ids
    raise CheckpointError(f"{gen_path}: field 'eos_token_id' missing (nor in config.json or the "
                          "tokenizer): sampling would never stop")


def _turn_end(tokenizer, eos_ids: tuple[int, ...], root: Path) -> int:
    """The EOS id the chat template puts right after an assistant message (else the first)."""
    msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "content": _SENTINEL}]
    try:
        text = tokenizer.apply_chat_template(msgs, tokenize=False)
    except Exception as e:  # noqa: BLE001 - a template error names the checkpoint's file
        raise CheckpointError(f"{root}: the chat template fails on a user + assistant "
                              f"conversation: {e}") from e
    if _SENTINEL in text:
        after = text.split(_SENTINEL, 1)[1]
        for i in tokenizer(after, add_special_tokens=False)["input_ids"][:4]:
            if int(i) in eos_ids:
                return int(i)
    return eos_ids[0]


def _tokenizer(root: Path):
    from transformers import AutoTokenizer

    if not any((root / f).exists() for f in ("tokenizer.json", "tokenizer_config.json",
                                              "tokenizer.model", "vocab.json")):
        raise CheckpointError(f"{root}: no tokenizer (tokenizer.json / tokenizer_config.json); "
                              "a run uses the checkpoint's own tokenizer")
    try:
        tok = AutoTokenizer.from_pretrained(str(root))
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds
        raise CheckpointError(f"{root}: the tokenizer does not load: {e}") from e
    if not getattr(tok, "chat_template", None):
        raise CheckpointError(f"{root / 'tokenizer_config.json'}: field 'chat_template' missing "
                              "(nor chat_template.jinja): prompts are rendered with the "
                              "checkpoint's chat template")
    tok.clean_up_tokenization_spaces = False  # decoding must give the sampled text back exactly
    return tok


def open_policy(model: ModelConfig, local: Path) -> Policy:
    """Opens and checks the checkpoint folder `local` (already local: see `localize_folder`).

    Raises:
      CheckpointError / ConfigError: naming the file and the field.
    """
    root = Path(local)
    config_path = root / "config.json"
    source_config = _read_json(config_path, "the architecture")
    try:
        base = LingConfig.from_hf_dict(source_config)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{config_path}: {e}") from e
    cfg = base.replace(**checkpoint_overrides(model, base, str(config_path)))
    if not any((root / f).exists() for f in WEIGHT_FILES):
        raise CheckpointError(f"{root}: no {' or '.join(WEIGHT_FILES)}")
    tok = _tokenizer(root)
    if len(tok) > cfg.vocab_size:
        raise CheckpointError(f"{root}: the tokenizer has {len(tok)} tokens but config.json's "
                              f"vocab_size (the embedding) is {cfg.vocab_size}")
    eos = _eos_ids(root, source_config, tok)
    bad = [i for i in eos if not 0 <= i < cfg.vocab_size]
    if bad:
        raise CheckpointError(f"{root / 'generation_config.json'}: field 'eos_token_id' {bad} is "
                              f"outside the vocabulary ({cfg.vocab_size})")
    pad = tok.pad_token_id if tok.pad_token_id is not None else source_config.get("pad_token_id")
    pad = eos[0] if pad is None else int(pad)
    # The sampler stops at the generation EOS ids; the rest of the architecture is config.json's.
    cfg = cfg.replace(eos_token_id=eos if len(eos) > 1 else eos[0], pad_token_id=pad)
    return Policy(root, cfg, tok, eos, _turn_end(tok, eos, root), pad, source_config)


def localize_folder(init_from: str, cache: Path) -> Path:
    """A local copy of a `gs://` checkpoint folder (in `cache`, reused), or the path itself."""
    if not init_from.startswith("gs://"):
        root = Path(init_from)
        if not root.is_dir():
            raise ConfigError(f"config.model.init_from={init_from!r}: no such folder")
        return root
    from etils import epath  # reads gs:// through gcsfs or tf.io.gfile, whichever is installed

    src = epath.Path(init_from)
    dst = cache / init_from[len("gs://"):].strip("/").replace("/", "_")
    done = dst / ".rcca-complete"
    if done.exists():
        return dst
    # Copied into a folder of this process's own, then renamed whole: processes sharing the
    # cache never read a file that another is still writing.
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".tmp", dir=cache))
    for f in src.iterdir():
        if f.is_file():
            f.copy(epath.Path(tmp / f.name))
    (tmp / done.name).write_text(init_from)
    try:
        tmp.rename(dst)
    except OSError:  # another process renamed its copy first
        shutil.rmtree(tmp, ignore_errors=True)
        if not done.exists():
            raise CheckpointError(f"{dst}: an incomplete copy of {init_from} (no {done.name}); "
                                  "remove the folder to copy it again") from None
    return dst


def write_scratch(folder: Path, cfg: LingConfig, texts: Sequence[str], seed: int) -> None:
    """A new random policy in the released format: weights, tokenizer + chat template.

    The tokenizer is a byte-level BPE trained on `texts` to at most `cfg.vocab_size`
    tokens; the model's vocabulary is the tokenizer's size. Written to a temporary
    folder and renamed, so a killed run never leaves half a checkpoint.
    """
    from rcca_jax.data.tokenizer import train_tokenizer

    tok = train_tokenizer(texts, cfg.vocab_size)
    eos, pad = tok.convert_tokens_to_ids(tok.eos_token), tok.convert_tokens_to_ids(tok.pad_token)
    cfg = cfg.replace(vocab_size=len(tok), eos_token_id=eos, pad_token_id=pad)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_pretrained(Ling(cfg, nnx.Rngs(seed)), tmp)
    tok.save_pretrained(str(tmp))
    (tmp / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [eos], "pad_token_id": pad, "bos_token_id": tok.bos_token_id}, indent=2))
    tmp.rename(folder)


def resolve(model: ModelConfig, workdir: Path, scratch_texts, seed: int = 0) -> Policy:
    """Opens the run's policy folder, writing the scratch one first if asked (and absent).

    Args:
      model: the config's model section.
      workdir: the run folder (`init/` for scratch, `init_cache/` for gs://).
      scratch_texts: a callable returning the texts to train a scratch tokenizer on.
      seed: initialisation of a scratch policy's weights.
    """
    if model.init_from == SCRATCH:
        folder = workdir / "init"
        if jax.process_index() == 0 and not (folder / "config.json").exists():
            write_scratch(folder, LingConfig(**dict(model.fields)), scratch_texts(), seed)
        from rcca_jax.train import multihost

        multihost.sync("scratch-policy")
        # The tokenizer decided these when the folder was written; every other field must
        # still match it (a workdir written by a config of another shape is an error).
        by_tokenizer = ("vocab_size", "eos_token_id", "pad_token_id")
        model = dataclasses.replace(model, fields={k: v for k, v in model.fields.items()
                                                   if k not in by_tokenizer})
        return open_policy(model, folder)
    return open_policy(model, localize_folder(model.init_from, workdir / "init_cache"))


def export(model: Ling, policy: Policy, dest: Path, dtype: str = "") -> Path:
    """Writes the policy to `dest` in the released format (all processes call this).

    The weights are `save_pretrained`'s; config.json is the source's with its
    torch_dtype; tokenizer, chat template and generation files are copied unchanged.
    """
    src = policy.source_config
    dtype = dtype or src.get("dtype") or src.get("torch_dtype") or "float32"
    tmp = dest.with_name(dest.name + ".tmp")
    if jax.process_index() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    save_pretrained(model, tmp, dtype=dtype, config_json=policy.source_config)
    if jax.process_index() == 0:
        for f in policy.path.iterdir():
            if f.is_file() and f.name not in WEIGHT_FILES + ("config.json",) and \
                    not f.name.endswith(".safetensors") and not f.name.startswith("."):
                shutil.copy2(f, tmp / f.name)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    from rcca_jax.train import multihost

    multihost.sync(f"export-{dest.name}")
    return dest
