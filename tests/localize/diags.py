"""Diagnostic records and span lookups shared by the localization rule tests."""

from __future__ import annotations


from evaluators.contract import JsException


def span(sub: str, text: str, nth: int = 0) -> tuple[int, int]:
    """[start, end) of the ``nth`` occurrence of ``sub`` in ``text``."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(sub, start + 1)
    return start, start + len(sub)


def probe_failure(check: dict, action: dict | None, **kw) -> dict:
    """A failed ``check`` step, after ``action`` when given, as the evaluator records it."""
    after = None if action is None else {"step_index": 0, "step": action,
                                         "locator": action.get("locator")}
    return {"kind": "probe_failure", "reason": kw.pop("reason", "wrong_value"), "stage": "rubric",
            "severity": "moderate",
            "rubric_id": "r", "message": kw.pop("message", "expect failed"), "step_index": 1,
            "step": check, "locator": check.get("locator"), "expected": check.get("value"),
            "actual": "x", "after_action": after, **kw}


def ran(g, *names: str) -> dict:
    """Precise coverage in which every function with one of ``names`` ran once."""
    fns = [f for n in names for f in g.functions_named(n)]
    return {"functions": [{"name": f.name, "start": f.span[0], "end": f.span[1], "count": 1}
                          for f in fns]}


def exception(report: str) -> dict:
    """The ``exception`` field the evaluator writes for a page's report ``Name: message``."""
    report = report.removeprefix("uncaught ")
    name, _, message = report.partition(": ") if ": " in report else ("", "", report)
    return JsException.from_report(name, message).to_json()


def page_error(message: str, frames: list[dict], **kw) -> dict:
    """An uncaught exception thrown while loading (``message``: ``uncaught Name: text``),
    with its stack ``frames`` (``in_app``, ``offset``)."""
    return {"kind": "page_error", "reason": "uncaught_at_load", "stage": "runtime",
            "severity": "severe", "rubric_id": None, "message": message,
            "exception": exception(message), "frames": frames, **kw}


def plain(evidence) -> list[dict]:
    """Evidence items without the ids of the rules that blamed or demoted them."""
    return [{k: v for k, v in e.items() if k not in ("rule", "also", "demoted_by")}
            for e in evidence]


def rules_of(evidence: dict) -> list[str]:
    """Every rule that blamed an evidence item's span (``rule``, then ``also``)."""
    return [evidence["rule"], *evidence.get("also", ())]
