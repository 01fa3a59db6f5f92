"""Gate F: find the app inside the response text.

The extracted code keeps its character offset in the response, because
localization maps code spans back to response characters and then to the
sampled tokens. All offsets in this package are Python str indices (Unicode
code points) into the `response` string.
"""

from __future__ import annotations

import dataclasses
import re

from evaluators.checks.textindex import scrub_surrogates

# An opening fence: 3+ backticks or tildes, an optional info string that names
# html (```html, ```HTML, ``` html), up to the end of the line.
_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n", re.M)
_HTML_START = re.compile(r"<!doctype\s+html|<html[\s>]", re.I)
_HTML_END = re.compile(r"</html\s*>", re.I)


@dataclasses.dataclass(frozen=True)
class Extraction:
    """The app's code and where it sits in the response.

    Attributes:
      code: the HTML document, `response[start:end]` with any lone surrogate
        replaced by U+FFFD (what the served UTF-8 document holds; one character
        for one, so every offset stays valid).
      start, end: character offsets of the code in the response.
      method: "fenced" (a ```html block) or "raw" (a bare HTML document).
    """

    code: str
    start: int
    end: int
    method: str

    def to_response(self, offset: int) -> int:
        """Maps a character offset in `code` to one in the response."""
        return self.start + offset


def _fenced_blocks(text: str) -> list[tuple[str, int, int]]:
    """Returns (info string, body start, body end) of every closed fenced block."""
    blocks = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if not m:
            return blocks
        fence = m.group("fence")
        close = re.compile(r"^[ \t]{0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", re.M)
        c = close.search(text, m.end())
        if not c:
            # An unclosed fence runs to the end of the text, as CommonMark says;
            # a truncated generation still yields its code.
            blocks.append((m.group("info").strip().lower(), m.end(), len(text)))
            return blocks
        body_end = c.start()
        if body_end > m.end() and text[body_end - 1] == "\n":
            body_end -= 1
        blocks.append((m.group("info").strip().lower(), m.end(), body_end))
        pos = c.end()


def extract_app(response: str) -> Extraction | None:
    """Finds the app: the last ```html block, else a bare HTML document.

    A fenced block with no info string counts when its body is an HTML
    document. Returns None when there is no app (gate F fails).
    """
    last = None
    for info, start, end in _fenced_blocks(response):
        lang = info.split()[0] if info else ""
        if lang in ("html", "htm", "xhtml") or (
                lang == "" and _HTML_START.search(response, start, min(end, start + 2000))):
            if response[start:end].strip():
                last = (start, end)
    if last is not None:
        return Extraction(scrub_surrogates(response[last[0]:last[1]]), *last, "fenced")
    m = _HTML_START.search(response)
    if not m:
        return None
    ends = list(_HTML_END.finditer(response, m.start()))
    end = ends[-1].end() if ends else len(response.rstrip())
    return Extraction(scrub_surrogates(response[m.start():end]), m.start(), end, "raw")
