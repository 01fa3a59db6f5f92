"""Token character ranges on a hand-built byte-level BPE, and span masks."""

from __future__ import annotations

import numpy as np
import pytest

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

from evaluators.localize.tokens import span_mask, token_bytes, token_char_ranges  # noqa: E402

EOS = 260


def _byte_chars() -> list[str]:
    """Character of each byte in the byte-level alphabet, derived from the library's alphabet:
    printable Latin-1 bytes stand for themselves, the others take the remaining alphabet
    characters (all >= U+0100) in byte order."""
    alphabet = set(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    extra = iter(sorted(c for c in alphabet if ord(c) >= 256))
    return [chr(b) if chr(b) in alphabet else next(extra) for b in range(256)]


@pytest.fixture(scope="module")
def tok():
    """Vocabulary: id b is the single byte b; 256 'ab', 257 = bytes F0 9F (the first half
    of a 4-byte emoji), 258 'é' (C3 A9), 259 ' w'; 260 is a special EOS."""
    ch = _byte_chars()
    vocab = {ch[b]: b for b in range(256)}
    merges = [("a", "b"), (ch[0xF0], ch[0x9F]), (ch[0xC3], ch[0xA9]), (ch[0x20], "w")]
    for i, (x, y) in enumerate(merges):
        vocab[x + y] = 256 + i
    model = tokenizers.models.BPE(vocab=vocab, merges=merges)
    t = tokenizers.Tokenizer(model)
    t.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = tokenizers.decoders.ByteLevel()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<|eos|>")
    assert fast.eos_token_id == EOS
    # The library's own decoder agrees with the vocabulary built above.
    assert fast.decode([258, 257, 0x98, 0x80, 0xE6, 0x97, 0xA5]) == "é😀日"
    return fast


TEXT = "ab wé😀日"  # characters: a0 b1 ' '2 w3 é4 😀5 日6


def test_canonical_encoding(tok):
    ids = tok("ab wé😀日", add_special_tokens=False)["input_ids"]
    assert ids == [256, 259, 258, 257, 0x98, 0x80, 0xE6, 0x97, 0xA5]
    ranges = token_char_ranges(TEXT, tok)  # no ids: encodes the text
    assert ranges.tolist() == [[0, 2], [2, 4], [4, 5], [5, 6], [5, 6], [5, 6], [6, 7], [6, 7],
                               [6, 7]]
    assert ranges.dtype == np.int64


def test_sampled_sequence_differs_from_canonical(tok):
    # 'ab' as 'a' + 'b', ' w' as ' ' + 'w', 'é' as its two bytes, the emoji as four bytes,
    # then EOS.
    ids = [0x61, 0x62, 0x20, 0x77, 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, 0xE6, 0x97,
           0xA5, EOS]
    ranges = token_char_ranges(TEXT, tok, ids)
    assert ranges.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [4, 5], [5, 6], [5, 6],
                               [5, 6], [5, 6], [6, 7], [6, 7], [6, 7], [7, 7]]


def test_special_tokens_are_empty_anywhere(tok):
    ids = [EOS, 256, EOS, 259, 258, EOS]
    assert token_bytes(tok, ids) == [b"", b"ab", b"", b" w", "é".encode(), b""]
    ranges = token_char_ranges("ab wé", tok, ids)
    assert ranges.tolist() == [[0, 0], [0, 2], [2, 2], [2, 4], [4, 5], [5, 5]]


def test_invalid_utf8_maps_each_bad_sequence_to_its_replacement_char(tok):
    # C3 alone is a truncated 'é'; F0 9F is a truncated emoji: one U+FFFD each.
    ids = [0xC3, 0x61, 257, 0x62]
    ranges = token_char_ranges("\ufffda\ufffdb", tok, ids)
    assert ranges.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]
    # A stray continuation byte, then a lead byte followed by a complete 'é'.
    ids = [0x80, 0x61, 0xC3, 258]
    ranges = token_char_ranges("\ufffda\ufffdé", tok, ids)
    assert ranges.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]


def test_text_mismatch_raises(tok):
    with pytest.raises(ValueError, match="first difference at character 1"):
        token_char_ranges("ax", tok, [0x61, 0x62])


def test_non_byte_level_vocabulary_raises():
    model = tokenizers.models.WordLevel(vocab={"\u2581hi": 0, "[UNK]": 1}, unk_token="[UNK]")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer(model))
    with pytest.raises(ValueError, match="not byte-level BPE"):
        token_bytes(fast, [0])


def test_span_mask(tok):
    ids = [0x61, 0x62, 0x20, 0x77, 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, 0xE6, 0x97, 0xA5, EOS]
    ranges = token_char_ranges(TEXT, tok, ids)
    T = len(ids)

    def mask(*spans):
        return np.flatnonzero(span_mask(ranges, list(spans))).tolist()

    assert mask((4, 5)) == [4, 5]  # both halves of 'é'
    assert mask((5, 6)) == [6, 7, 8, 9]  # every byte token of the emoji
    assert mask((1, 4)) == [1, 2, 3]
    assert mask((0, 1), (6, 7)) == [0, 10, 11, 12]
    assert mask((3, 3)) == []  # empty span
    assert mask((7, 9)) == []  # past the text: the empty EOS range overlaps nothing
    assert mask() == []
    assert span_mask(ranges, []).shape == (T,)
    assert span_mask(ranges, np.array([[0, 7]])).sum() == T - 1  # all but EOS


def test_span_mask_rejects_unsorted_ranges():
    with pytest.raises(ValueError):
        span_mask(np.array([[2, 3], [0, 1]]), [(0, 1)])
