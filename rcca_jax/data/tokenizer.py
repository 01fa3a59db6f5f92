"""A byte-level BPE tokenizer trained on the generated tasks' prompts and references.

The demo policy is tiny, so its vocabulary is too: about a thousand tokens learned from the very
texts it will read and write (HTML, the family prompts). Byte-level BPE covers every string, so
encoding never fails on text the model invents, and decoding gives the exact text back (no
normalisation, no whitespace clean-up), which localization needs: it maps response characters
to sampled tokens.

Special tokens: `<pad>` = 0, `<eos>` = 1, `<bos>` = 2. Encoding adds none of them; the caller
frames sequences itself (`<bos>` prompt response `<eos>`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from rcca_jax.data.taskfamily import reference_response

PAD, EOS, BOS = "<pad>", "<eos>", "<bos>"
SPECIAL_TOKENS = (PAD, EOS, BOS)  # in id order: the trainer assigns them ids 0, 1, 2
PROMPT_TEMPLATE = "### Request\n{prompt}\n### Response\n"


def prompt_text(task: dict) -> str:
    """The text the policy is conditioned on; its response follows right after the newline."""
    return PROMPT_TEMPLATE.format(prompt=task["prompt"])


def training_texts(tasks: Iterable[dict]) -> list[str]:
    """Prompt plus reference response of each task: exactly what the policy will see and write."""
    return [prompt_text(t) + reference_response(t) for t in tasks]


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """Trains a byte-level BPE on texts.

    Args:
      texts: the training corpus.
      vocab_size: the largest vocabulary (special tokens and the 256 byte symbols included);
        a small corpus may yield fewer tokens.

    Returns:
      A PreTrainedTokenizerFast with `<pad>`, `<eos>`, `<bos>` as ids 0, 1, 2.
    """
    # No normaliser: NFC or lower-casing would break the lossless round trip. No prefix space:
    # it would add a character to the decoded text.
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
        # Every byte is in the vocabulary even if the corpus never uses it: no unknown tokens.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(list(texts), trainer=trainer)
    return _wrap(bpe)


def _wrap(bpe: Tokenizer) -> PreTrainedTokenizerFast:
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token=PAD, eos_token=EOS,
                                  bos_token=BOS, clean_up_tokenization_spaces=False)
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    if ids != [0, 1, 2]:
        raise ValueError(f"special tokens {SPECIAL_TOKENS} got ids {ids}, expected [0, 1, 2]")
    return tok


def load_or_train(path: str | Path, tasks: Iterable[dict], vocab_size: int = 1024
                  ) -> PreTrainedTokenizerFast:
    """Loads the tokenizer saved at path, or trains one on tasks and saves it there.

    A saved tokenizer is reused as is (whatever tasks and vocab_size are now): delete the
    folder to retrain.

    Args:
      path: a folder for save_pretrained / from_pretrained.
      tasks: generated tasks (with meta.reference) to train on when nothing is saved.
      vocab_size: the vocabulary size when training.
    """
    path = Path(path)
    if (path / "tokenizer.json").is_file():
        tok = PreTrainedTokenizerFast.from_pretrained(str(path))
        # Older saves may lack the flag; decoding must never touch spaces.
        tok.clean_up_tokenization_spaces = False
        return tok
    tok = train_tokenizer(training_texts(tasks), vocab_size)
    path.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(path))
    return tok
