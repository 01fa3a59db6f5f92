"""A byte-level BPE tokenizer trained on the generated tasks' prompts and references.

The demo policy is tiny, so its vocabulary is too: about a thousand tokens learned from the very
texts it will read and write (HTML, the family prompts). Byte-level BPE covers every string, so
encoding never fails on text the model invents, and decoding gives the exact text back (no
normalisation, no whitespace clean-up), which localization needs: it maps response characters
to sampled tokens.

Special tokens: `<pad>` = 0, `<eos>` = 1, `<bos>` = 2. Encoding adds none of them. The chat
template (`CHAT_TEMPLATE`, saved with the tokenizer as any released checkpoint's is) frames a
conversation: an optional system turn, the request, then the response, which ends in `<eos>`.
A run renders prompts with the template like it does for a released model.
"""

from __future__ import annotations

from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from evaluators.tasks.family import reference_response

PAD, EOS, BOS = "<pad>", "<eos>", "<bos>"
SPECIAL_TOKENS = (PAD, EOS, BOS)  # in id order: the trainer assigns them ids 0, 1, 2
PROMPT_TEMPLATE = "### Request\n{prompt}\n### Response\n"
# Jinja, as transformers' `apply_chat_template` reads it. Rendering [user] with the generation
# prompt gives exactly PROMPT_TEMPLATE (the text the tokenizer was trained on).
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ '### System\\n' + m['content'] + '\\n' }}"
    "{% elif m['role'] == 'user' %}{{ '### Request\\n' + m['content'] + '\\n' }}"
    "{% elif m['role'] == 'assistant' %}{{ '### Response\\n' + m['content'] + eos_token }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '### Response\\n' }}{% endif %}")


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
    tok.chat_template = CHAT_TEMPLATE
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    if ids != [0, 1, 2]:
        raise ValueError(f"special tokens {SPECIAL_TOKENS} got ids {ids}, expected [0, 1, 2]")
    return tok
