"""Who wrote what a failed probe read: blame from the page's recorded DOM writes.

With `BrowserConfig.trace_writers` a failed probe's diagnostic carries the writes the page
recorded on the element its failing step checked (`writers`: what was written, on which
node, and the stack of the write; `sandbox.writers`). A wrong value was put there by its
latest write: the statement at that write's top in-app frame is blamed directly, the calls
below it on the stack, and the statements of the element's other writes of the same sort,
as context. It reads no names: only where the page was when it wrote. What it cannot blame
is a write that never happened (a dropped update leaves the element's last write at load);
the rules reading the acted-on element's handlers cover that.
"""

from __future__ import annotations

from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, _Case
from evaluators.localize.spans_common import _line_at, _statement_head

Span = tuple[int, int]
# The writes that can change what each check reads. A check not listed reads any.
_KINDS = {
    "text": {"text", "html", "child"}, "contains_text": {"text", "html", "child"},
    "empty": {"text", "html", "child"}, "inner_text": {"text", "html", "child"},
    "inner_html": {"text", "html", "child"}, "count": {"child", "html"},
    "value": {"value", "attr"}, "checked": {"value", "attr"},
    "enabled": {"attr"}, "disabled": {"attr"},
    "class": {"class", "attr"}, "attribute": {"attr", "class", "value"},
    "css": {"style", "class", "attr"}, "canvas": {"draw", "attr"},
    "visible": {"style", "class", "attr", "child", "html"},
    "hidden": {"style", "class", "attr", "child", "html"},
}
# Other writes of the element blamed as context, at most.
MAX_OTHER_WRITES = 3


def _in_app(write: dict) -> list[int]:
    """The response offsets of a write's in-app frames, top first."""
    return [f["offset"] for f in write.get("frames") or ()
            if isinstance(f, dict) and f.get("in_app") and isinstance(f.get("offset"), int)]


def _kinds(checks) -> set[str] | None:
    """The write kinds that can change what the failed checks read (`_Failure.checks`: an
    `expect` kind, or `read:<r>` for a saved reading); None for any."""
    out: set[str] = set()
    for check, _ in checks:
        kinds = _KINDS.get(check.removeprefix("read:"))
        if kinds is None:
            return None
        out |= kinds
    return out or None


def _seq(w: dict) -> int:
    return w["seq"] if isinstance(w.get("seq"), int) else 0


def relevant_writes(d: dict, checks) -> list[dict]:
    """The diagnostic's writes that can change what its step checked, latest last; those on
    the element itself or inside it before those that created it (`around`)."""
    writes = [w for w in d.get("writers") or () if isinstance(w, dict) and _in_app(w)]
    kinds = _kinds(checks)
    if kinds is not None:
        writes = [w for w in writes if w.get("kind") in kinds]
    own = [w for w in writes if w.get("where") in ("self", "inside")]
    return sorted(own or writes, key=_seq)


@rule("probe.writers")
def writer_blame(c: _Case) -> Ops:
    """A failed check blames the statement of the latest write of the element it read
    (its top in-app frame) directly, and the calls below it and the element's other writes
    as context."""
    writes = relevant_writes(c.d, c.failure.checks) if c.d.get("writers") else []
    if not writes:
        return
    g = c.g

    def head(off: int) -> Span:
        return _statement_head(g, off) or _line_at(g.text, off)

    latest, *_ = offsets = _in_app(writes[-1])
    what = f"{writes[-1].get('kind')} write ({writes[-1].get('where')})"
    yield from c.add("dir", head(latest),
                     f"made the latest {what} of the element the failed step checked", "stack")
    for k, off in enumerate(offsets[1:], 1):
        yield from c.add("ctx", head(off), f"call on the stack of that write (frame {k})",
                         "stack")
    seen = {head(latest)}
    for w in reversed(writes[:-1]):
        span = head(_in_app(w)[0])
        if span in seen:
            continue
        seen.add(span)
        yield from c.add("ctx", span, f"an earlier {w.get('kind')} write of the element",
                         "stack")
        if len(seen) > MAX_OTHER_WRITES:
            break
