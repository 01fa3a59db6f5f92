"""Character spans of a response -> tokens of the sampled token sequence.

The policy's sampled ids need not be the canonical encoding of the response text (it may emit
``ab`` as ``a`` + ``b``), so token ranges come from the ids themselves: each id is turned into
its exact bytes through the byte-level BPE alphabet (not ``decode`` of a single id, which gives
U+FFFD for a partial UTF-8 character), byte offsets are accumulated, and byte offsets are mapped
to ``str`` indices of the response. A token holding only part of a character's bytes overlaps
that character. Special tokens (EOS, padding) hold no text and get empty ranges.

Only byte-level BPE vocabularies (GPT-2 style: Qwen2, Llama 3...) are supported; other
vocabularies raise ``ValueError`` instead of producing wrong ranges.
"""

from __future__ import annotations

import weakref
from typing import Protocol, Sequence

import numpy as np

Span = tuple[int, int]


class FastTokenizer(Protocol):
    """The part of a ``transformers`` fast tokenizer used here."""

    all_special_ids: list[int]
    added_tokens_decoder: dict

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str | None]: ...

    def __call__(self, text: str, add_special_tokens: bool = ...) -> dict: ...


def _byte_alphabet() -> dict[str, int]:
    """The byte-level BPE alphabet: one printable character per byte value, inverted.

    Bytes that are printable Latin-1 characters stand for themselves; the others (controls,
    space, soft hyphen...) are given the code points 256, 257, ... in byte order.
    """
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    kept_set = set(kept)
    char_of = {b: chr(b) for b in kept}
    extra = 0
    for b in range(256):
        if b not in kept_set:
            char_of[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in char_of.items()}


_BYTE_OF = _byte_alphabet()


# Bytes of the ids already seen, per tokenizer: a training run meets the same few thousand ids
# again and again, and converting ids one by one dominated the cost of localizing a response.
_SEEN: "weakref.WeakKeyDictionary[object, dict[int, bytes]]" = weakref.WeakKeyDictionary()


def token_bytes(tokenizer: FastTokenizer, token_ids: Sequence[int]) -> list[bytes]:
    """The bytes each token contributes to the decoded text (b'' for special tokens).

    Ids are converted once per tokenizer object and remembered (the vocabulary of a tokenizer
    is not expected to change under it).

    Args:
        tokenizer: A byte-level BPE fast tokenizer.
        token_ids: Token ids, [T].

    Returns:
        T byte strings.

    Raises:
        ValueError: an id is unknown, or a token is not in the byte-level alphabet.
    """
    ids = [int(i) for i in token_ids]
    try:
        seen = _SEEN.setdefault(tokenizer, {})
    except TypeError:  # not weakly referenceable: no memory
        seen = {}
    new = [i for i in dict.fromkeys(ids) if i not in seen]
    if new:
        seen.update(zip(new, _convert(tokenizer, new)))
    return [seen[i] for i in ids]


def _convert(tokenizer: FastTokenizer, ids: list[int]) -> list[bytes]:
    added = tokenizer.added_tokens_decoder
    special = set(tokenizer.all_special_ids)
    special.update(i for i, tok in added.items() if getattr(tok, "special", False))
    out = []
    for i, tok in zip(ids, tokenizer.convert_ids_to_tokens(ids)):
        if i in special:
            out.append(b"")
        elif i in added:  # non-special added tokens are decoded verbatim
            out.append(added[i].content.encode("utf-8"))
        elif tok is None:
            raise ValueError(f"token id {i} is not in the vocabulary")
        else:
            try:
                out.append(bytes([_BYTE_OF[c] for c in tok]))
            except KeyError:
                raise ValueError(f"token {tok!r} (id {i}) is not byte-level BPE") from None
    return out


def _char_of_byte(data: bytes) -> np.ndarray:
    """Index of the character containing each byte of ``data``, as Python decodes it.

    Invalid sequences become one U+FFFD each, as ``errors='replace'`` does; each such
    sequence is located with a strict decode, which reports its exact byte range.

    Returns:
        int64 [len(data) + 1]; the last entry is the number of characters.
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    starts = (arr & 0xC0) != 0x80  # every byte but UTF-8 continuation bytes starts a char
    pos = 0
    while pos < len(data):
        try:
            data[pos:].decode("utf-8")
            break
        except UnicodeDecodeError as err:
            s, e = pos + err.start, pos + err.end
            starts[s] = True
            starts[s + 1:e] = False
            pos = e
    index = np.cumsum(starts, dtype=np.int64) - 1
    return np.append(index, int(starts.sum()))


def token_char_ranges(text: str, tokenizer: FastTokenizer,
                      token_ids: Sequence[int] | None = None) -> np.ndarray:
    """Character range [start, end) of each token in ``text``.

    Args:
        text: The response, equal to the decoding of ``token_ids`` without special tokens.
        tokenizer: A byte-level BPE fast tokenizer (``transformers``).
        token_ids: The sampled ids, [T]. When None, ``text`` is encoded (without special
            tokens) and the ids of that encoding are used. The tokenizer's own offset mapping
            is not used: with ``trim_offsets`` it drops the leading space of ``Ġword`` tokens,
            leaving characters that belong to no token.

    Returns:
        int64 [T, 2], non-decreasing in both columns. Special tokens get an empty range at
        their position. Tokens that split a multi-byte character both overlap it.

    Raises:
        ValueError: the tokens do not decode to ``text``, or the vocabulary is not byte-level.
    """
    if token_ids is None:
        token_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    parts = token_bytes(tokenizer, token_ids)
    data = b"".join(parts)
    decoded = data.decode("utf-8", errors="replace")
    if decoded != text:
        at = next((k for k, (a, b) in enumerate(zip(decoded, text)) if a != b),
                  min(len(decoded), len(text)))
        raise ValueError(f"tokens decode to a different text (first difference at character "
                         f"{at}: {decoded[at:at + 20]!r} vs {text[at:at + 20]!r})")
    char_of = _char_of_byte(data)
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    ends_b = np.cumsum(lengths)  # [T]
    starts_b = ends_b - lengths
    starts = char_of[starts_b]
    last = char_of[np.maximum(ends_b - 1, 0)] + 1
    ends = np.where(lengths > 0, last, starts)
    return np.stack([starts, ends], axis=1).astype(np.int64).reshape(len(parts), 2)


def span_mask(token_char_ranges: np.ndarray, spans: Sequence[Span] | np.ndarray) -> np.ndarray:
    """Which tokens overlap any of the character spans.

    A token [a, b) overlaps a span [s, e) when a < e and s < b; empty tokens and empty spans
    overlap nothing.

    Args:
        token_char_ranges: int [T, 2] from ``token_char_ranges`` (non-decreasing columns).
        spans: [K] spans (start, end).

    Returns:
        bool [T].

    Raises:
        ValueError: the token ranges are not non-decreasing.
    """
    ranges = np.asarray(token_char_ranges, dtype=np.int64).reshape(-1, 2)
    starts, ends = ranges[:, 0], ranges[:, 1]
    if np.any(np.diff(starts) < 0) or np.any(np.diff(ends) < 0):
        raise ValueError("token ranges must be non-decreasing, as token_char_ranges gives them")
    cover = np.zeros(len(ranges) + 1, dtype=np.int64)  # difference array of covered runs
    for s, e in np.asarray(spans, dtype=np.int64).reshape(-1, 2):
        if e <= s:
            continue
        # With sorted ranges, the tokens overlapping [s, e) form one run: the first token
        # ending after s up to the last token starting before e.
        lo = np.searchsorted(ends, s, side="right")
        hi = np.searchsorted(starts, e, side="left")
        if lo < hi:
            cover[lo] += 1
            cover[hi] -= 1
    return (np.cumsum(cover[:-1]) > 0) & (ends > starts)
