"""Offset conversions between the coordinate systems a diagnostic passes through.

tree-sitter reports UTF-8 byte offsets, V8 stack frames report 1-based lines and
UTF-16 columns of the served document, and everything we emit uses Python str
indices (code points). Getting these wrong shifts spans on any response with a
non-ASCII character, so they live in one place.
"""

from __future__ import annotations

import bisect
import itertools
import re

# A lone UTF-16 surrogate (a JSON "\ud800" escape with no partner) is a str character that
# no UTF-8 encoder accepts.
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, one character for one.

    What a browser shows for bytes that are not UTF-8; every offset into `text` still
    points at the same character, and U+FFFD is 3 bytes in UTF-8 as a surrogate is under
    ``surrogatepass``, so byte offsets agree too.
    """
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


class TextIndex:
    """Precomputed offset tables for one string.

    Args:
      text: the string (e.g. the extracted HTML document).
    """

    def __init__(self, text: str):
        self.text = text
        self.ascii = text.isascii()
        if not self.ascii:
            # Byte offset where each character starts, plus the end sentinel.
            # surrogatepass: a lone surrogate counts 3 bytes, as its U+FFFD stand-in does.
            widths = (len(ch.encode("utf-8", "surrogatepass")) for ch in text)
            self._char_to_byte = [0, *itertools.accumulate(widths)]
            # The same for UTF-16 code units, V8's unit for columns and offsets.
            units = (2 if ord(ch) > 0xFFFF else 1 for ch in text)
            self._char_to_utf16 = [0, *itertools.accumulate(units)]
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    def byte_to_char(self, b: int) -> int:
        """Character offset of the character containing byte `b` (end maps to len)."""
        if self.ascii:
            return b
        return bisect.bisect_right(self._char_to_byte, b) - 1

    def char_to_byte(self, c: int) -> int:
        return c if self.ascii else self._char_to_byte[c]

    def line_col(self, c: int) -> tuple[int, int]:
        """1-based line and 1-based code-point column of character offset `c`."""
        line = bisect.bisect_right(self._line_starts, c) - 1
        return line + 1, c - self._line_starts[line] + 1

    def char_to_utf16(self, c: int) -> int:
        return c if self.ascii else self._char_to_utf16[c]

    def utf16_to_char(self, u: int) -> int:
        """Character offset of UTF-16 offset `u` (inside a surrogate pair: its character)."""
        if self.ascii:
            return min(u, len(self.text))
        return bisect.bisect_right(self._char_to_utf16, u) - 1

    def from_v8(self, line: int, column: int) -> int | None:
        """Character offset of a V8 position (1-based line, 1-based UTF-16 column).

        Returns None when the position lies outside the text.
        """
        if line < 1 or line > len(self._line_starts) or column < 1:
            return None
        start = self._line_starts[line - 1]
        end = self._line_starts[line] - 1 if line < len(self._line_starts) else len(self.text)
        c = self.utf16_to_char(self.char_to_utf16(start) + column - 1)
        return c if c <= end else None
