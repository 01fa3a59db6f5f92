"""Judge findings -> the code they blame (``evaluators.localize.spans``).

A ``judge_finding`` diagnostic (``evaluators.judge``) carries the judge's evidence as typed
fields: ``evidence_code`` (code quoted from the response), ``evidence_line`` (the line of
the app source the judge read it on), ``handler``, ``state_var`` and ``selector``. Nothing
reads the finding's words.

The stated rule: a quote found in the response is direct blame (its statements), with its
enclosing function as context; the named handler, state variable and selector are context
(their function, declaration and writes, element and style rules), except that when no
quote is found the named handler is direct, since it is then the judge's only pointer into
the code. Matching goes exact (white space ignored), then with quotes normalised (' " `),
then line by line fuzzily (difflib ratio at least ``LocalizeConfig.judge_fuzzy``); when a
quote occurs several times the line hint keeps the occurrences nearest to it.
"""

from __future__ import annotations

import difflib
import re

from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Span
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import _Case, _fn_at, Ops

_QUOTES = "'\"`"
_MOST = 3  # occurrences of one quote blamed at most (without a line hint to choose)


def _pattern(quote: str, loose_quotes: bool) -> re.Pattern | None:
    tokens = quote.split()
    if not tokens:
        return None
    parts = []
    for t in tokens:
        esc = re.escape(t)
        if loose_quotes:
            esc = re.sub(r"""\\?['"`]""", "[" + re.escape(_QUOTES) + "]", esc)
        parts.append(esc)
    return re.compile(r"\s*".join(parts))


def _fuzzy(g: CodeGraph, quote: str, threshold: float) -> list[Span]:
    """The app lines most like each line of ``quote`` (ratio at least ``threshold``)."""
    lo, hi = g.region
    lines, pos = [], lo
    for line in g.text[lo:hi].split("\n"):
        stripped = line.strip()
        if stripped:
            start = pos + line.index(stripped[0])
            lines.append((" ".join(stripped.split()), (start, start + len(stripped))))
        pos += len(line) + 1
    out = []
    for want in (" ".join(x.split()) for x in quote.split("\n")):
        if len(want) < 8:  # too short to tell apart fuzzily
            continue
        scored = [(difflib.SequenceMatcher(None, have, want).ratio(), span)
                  for have, span in lines if abs(len(have) - len(want)) < len(want)]
        best = max((r for r, _ in scored), default=0.0)
        if best >= threshold:
            out += [span for r, span in scored if r >= best - 1e-9]
    return out


def _line_offset(g: CodeGraph, line: int) -> int | None:
    """Offset of the start of 1-based ``line`` of the app source (the extracted region)."""
    lo, hi = g.region
    at = lo
    for _ in range(max(0, line - 1)):
        nxt = g.text.find("\n", at, hi)
        if nxt < 0:
            return None
        at = nxt + 1
    return at


def _nearest(g: CodeGraph, spans: list[Span], line: int | None) -> list[Span]:
    if line is None or len(spans) <= 1:
        return spans[:_MOST]
    at = _line_offset(g, line)
    if at is None:
        return spans[:_MOST]
    best = min(abs(s - at) for s, _ in spans)
    return [sp for sp in spans if abs(sp[0] - at) == best]


def find_quote(g: CodeGraph, quote: str, line: int | None, fuzzy: float) -> tuple[list[Span], str]:
    """Where the judge's quote is in the app, and how it was found (exact, quotes, fuzzy)."""
    lo, hi = g.region
    for how, loose in (("exact", False), ("quotes", True)):
        pattern = _pattern(quote, loose)
        found = [m.span() for m in pattern.finditer(g.text, lo, hi)] if pattern else []
        if found:
            return _nearest(g, found, line), how
    found = _fuzzy(g, quote, fuzzy)
    return (_nearest(g, found, line), "fuzzy") if found else ([], "")


@rule("judge.quoted_code")
def _quoted_code(c: _Case) -> Ops:
    """The statements holding the code the judge quoted (direct), their function (context).
    Returns whether the quote was found."""
    quote = str(c.d.get("evidence_code") or "").strip()
    if not quote:
        return False
    spans, how = find_quote(c.g, quote, c.d.get("evidence_line"), c.cfg.judge_fuzzy)
    for span in spans:
        fn = _fn_at(c.g, span[0])
        for s, e in _statements_in(c.g, span):
            yield from c.add("dir", (s, e), f"code the judge quoted ({how} match)", "text", fn)
        yield from c.function("ctx", fn, "function around the code the judge quoted", "text",
                              near=span[0])
    return bool(spans)


def _statements_in(g: CodeGraph, span: Span) -> list[Span]:
    """The innermost statements a quoted span touches (the span itself outside JS)."""
    inner = g.enclosing_statement(span[0])
    if inner is None:
        return [span]
    out = [inner]
    last = g.enclosing_statement(max(span[0], span[1] - 1))
    if last is not None and last != inner:
        out += [st for st in g.statements if inner[1] <= st[0] and st[1] <= last[1]
                and not any(o[0] <= st[0] and st[1] <= o[1] for o in out)]
    return out


@rule("judge.named_code")
def _named_code(c: _Case, quoted: bool) -> Ops:
    """The handler, state variable and selector the judge named (see the module)."""
    g = c.g
    handler = str(c.d.get("handler") or "").strip().split(".")[-1].rstrip("()")
    for fn in g.functions_named(handler) if handler else ():
        yield from c.function(
            "ctx" if quoted else "dir", fn.index, f"function {handler} the judge named",
            "text")
    state = str(c.d.get("state_var") or "").strip()
    for v in g.state_vars:
        if state and (v.name == state or v.name.split(".")[-1] == state):
            yield from c.add("ctx", v.decl, f"declares {v.name}, which the judge named", "text")
            for w in v.writes:
                yield from c.statement(
                    "ctx", w, f"writes {v.name}, which the judge named", _fn_at(g, w[0]))
    selector = str(c.d.get("selector") or "").strip()
    if selector:
        for x in _select(g, selector):
            yield from c.add(
                "ctx", g.elements[x].start_tag, f"element {selector} the judge named", "text")
        for r in g.css_rules:
            if selector in r.selector:
                yield from c.add(
                    "ctx", r.span, f"style rule for {selector}, which the judge named", "text")


def _select(g: CodeGraph, selector: str) -> list[int]:
    try:
        return [e.index for e in g.select(selector)]
    except Exception:  # noqa: BLE001 - a judge's selector may be anything
        return []


def judge_evidence(c: _Case) -> Ops:
    """The chain step of a judge finding: the quote, then the names."""
    found = yield from _quoted_code(c)
    yield from _named_code(c, bool(found))


@rule("judge.naive")
def judge_naive(c: _Case) -> Ops:
    """The baseline for a judge finding: the whole functions around the quoted code."""
    quote = str(c.d.get("evidence_code") or "").strip()
    spans, _ = find_quote(c.g, quote, c.d.get("evidence_line"), c.cfg.judge_fuzzy) \
        if quote else ([], "")
    for span in spans:
        fn = _fn_at(c.g, span[0])
        if fn is None:
            yield from c.statement("dir", span, "code the judge quoted", None)
        else:
            yield from c.function("dir", fn, "function around the code the judge quoted")
