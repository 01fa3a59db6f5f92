"""Static checks and value helpers for probe steps (spec: task-format.md, "Probe").

A malformed probe is the task's problem, never the response's: `check_probe`
finds unknown steps, missing fields, bad regexes and unknown variables before
anything runs, so the verdict is `error` without a browser round trip.
"""

from __future__ import annotations

import math
import re
from typing import Any

ACTIONS = ("click", "dblclick", "hover", "focus", "check", "uncheck", "fill", "press",
           "select_option", "drag_to")
MOUSE = ("move", "down", "up", "click")
EXPECTS = ("visible", "hidden", "text", "contains_text", "value", "checked", "enabled",
           "disabled", "empty", "class", "attribute", "css", "count")
ASSERTS = ("equal", "not_equal", "close", "not_close", "greater", "less", "contains",
           "truthy", "falsy")
READS = ("text", "inner_text", "inner_html", "value", "checked", "count", "box", "canvas",
         "screenshot")
LOCATOR_KEYS = frozenset({"css", "role", "name", "exact", "text", "label", "has_text", "nth"})
_STEP_KEYS = ("do", "mouse", "wait_ms", "save", "expect", "assert", "retry")
# Steps that act on the page: an uncaught exception they trigger is a runtime
# failure when the rubric is `core`.
INTERACTION_KEYS = ("do", "mouse")


class ProbeError(Exception):
    """The probe is malformed (verdict `error`)."""

    def __init__(self, step_index: int | None, message: str):
        self.step_index = step_index
        super().__init__(message)


def step_kind(step: dict) -> str:
    """The step's key among _STEP_KEYS (the spec allows exactly one)."""
    keys = [k for k in _STEP_KEYS if k in step]
    if len(keys) != 1:
        raise ValueError(f"a step needs exactly one of {_STEP_KEYS}, got {sorted(step)}")
    return keys[0]


def flat_steps(steps: Any) -> list[dict]:
    """The steps in order, with each `retry` block's steps in its place."""
    out = []
    for s in steps or ():
        out.extend(flat_steps(s["retry"]) if isinstance(s, dict) and "retry" in s else [s])
    return out


def compared_saves(steps: list, step: dict, index: int | None = None) -> list[dict]:
    """The `save` steps whose readings an `assert` step compares (among the steps before
    `index`, when given); [] for any other step."""
    if "assert" not in step:
        return []
    names = {v["var"] for v in (step.get("left"), step.get("right"))
             if isinstance(v, dict) and "var" in v}
    before = steps if index is None else steps[:index]
    return [s for s in flat_steps(before) if isinstance(s, dict) and s.get("save") in names]


# An element an evaluated reading looks up: `getElementById('x')`, or a selector literal
# (`querySelector('#x')`, an argument handed to the function, `d3.select('.y')`).
_EVAL_BY_ID = re.compile(r"""getElementById\(\s*(['"`])([^'"`]+)\1""")
_EVAL_SELECTOR = re.compile(r"""(['"`])([#.][-\w][^'"`]*)\1""")


def eval_locators(source: Any) -> list[str]:
    """The CSS locators of the elements an `eval` reading's source looks up (a plot's
    container whose data it reads), first seen first: the page code that fills them is what
    the reading checks."""
    if not isinstance(source, str):
        return []
    found = ["#" + m.group(2) for m in _EVAL_BY_ID.finditer(source)]
    found += [m.group(2) for m in _EVAL_SELECTOR.finditer(source)]
    return list(dict.fromkeys(found))


def js_regex(spec: dict) -> re.Pattern:
    """Compiles a {"regex", "flags"} value. JS-only flags (g, y, u, d) are no-ops here."""
    flags = 0
    for f in spec.get("flags", "") or "":
        if f not in "gimsuyd":
            raise ValueError(f"unknown regex flag '{f}'")
        flags |= {"i": re.I, "m": re.M, "s": re.S}.get(f, 0)
    return re.compile(spec["regex"], flags)


def js_string(value: Any) -> str:
    """String(value) as JavaScript would print a JSON scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return str(value)


def describe_locator(loc: Any) -> str:
    """A short human-readable form of a locator, for diagnostics."""
    if isinstance(loc, str):
        return loc
    if not isinstance(loc, dict):
        return repr(loc)
    if "css" in loc:
        text = loc["css"]
    elif "role" in loc:
        text = f"role={loc['role']}" + (f"[name={loc['name']!r}]" if "name" in loc else "")
    elif "text" in loc:
        text = f"text={loc['text']!r}"
    else:
        text = f"label={loc.get('label')!r}"
    if "has_text" in loc:
        text += f" >> has_text={loc['has_text']!r}"
    if "nth" in loc:
        text += f" >> nth={loc['nth']}"
    return text


def locator_css(loc: Any) -> str | None:
    """The CSS selector of a locator, when it has one."""
    if isinstance(loc, str):
        return loc
    if isinstance(loc, dict):
        return loc.get("css")
    return None


def _check_value(value: Any, known: set[str], where: str) -> None:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return
    if isinstance(value, dict) and "regex" in value:
        try:
            js_regex(value)
        except (re.error, ValueError, TypeError) as e:
            raise ValueError(f"{where}: bad regex {value.get('regex')!r}: {e}")
        return
    if isinstance(value, dict) and "var" in value:
        if not isinstance(value["var"], str) or value["var"] not in known:
            raise ValueError(f"{where}: unknown var {value['var']!r} (not saved earlier)")
        return
    raise ValueError(f"{where}: not a value: {value!r}")


def _check_locator(loc: Any, where: str) -> None:
    if isinstance(loc, str) and loc.strip():
        return
    if not isinstance(loc, dict) or not loc:
        raise ValueError(f"{where}: not a locator: {loc!r}")
    unknown = set(loc) - LOCATOR_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown locator keys {sorted(unknown)}")
    if not any(k in loc for k in ("css", "role", "text", "label")):
        raise ValueError(f"{where}: a locator needs one of css, role, text, label")
    nth = loc.get("nth")
    if nth is not None and nth not in ("first", "last") and not (isinstance(nth, int) and not isinstance(nth, bool)):
        raise ValueError(f"{where}: bad nth {nth!r}")


def _number(value: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_point(at: Any, where: str) -> None:
    if isinstance(at, dict) and "box" in at:
        _check_locator(at["box"], where + ".box")
        for k in ("fx", "fy", "dx", "dy"):
            if k in at and not _number(at[k]):
                raise ValueError(f"{where}.{k}: not a number: {at[k]!r}")
        return
    if not (isinstance(at, dict) and _number(at.get("x")) and _number(at.get("y"))):
        raise ValueError(f"{where}: a point is {{x, y}} or {{box, fx, fy}}, got {at!r}")


# `retry` blocks nested deeper than this are rejected (real probes nest one or two).
MAX_RETRY_DEPTH = 16


def _check_step(step: Any, known: set[str], where: str, depth: int = 0) -> None:
    if not isinstance(step, dict):
        raise ValueError(f"{where}: a step is an object")
    kind = step_kind(step)
    if kind == "do":
        if step["do"] not in ACTIONS:
            raise ValueError(f"{where}: unknown action {step['do']!r}")
        _check_locator(step.get("locator"), where + ".locator")
        if step["do"] in ("fill", "press", "select_option"):
            if "value" not in step:
                raise ValueError(f"{where}: '{step['do']}' needs a value")
            _check_value(step["value"], known, where + ".value")
        if step["do"] == "drag_to":
            _check_locator(step.get("target"), where + ".target")
    elif kind == "mouse":
        if step["mouse"] not in MOUSE:
            raise ValueError(f"{where}: unknown mouse action {step['mouse']!r}")
        if step["mouse"] in ("move", "click") or "at" in step:
            _check_point(step.get("at"), where + ".at")
        if "steps" in step and not (_number(step["steps"]) and 1 <= step["steps"] <= 1000):
            raise ValueError(f"{where}.steps: a count of mouse moves from 1 to 1000")
    elif kind == "wait_ms":
        if not _number(step["wait_ms"]) or step["wait_ms"] < 0:
            raise ValueError(f"{where}: wait_ms must be a non-negative number")
    elif kind == "save":
        if not isinstance(step["save"], str):
            raise ValueError(f"{where}: save needs a name")
        if "eval" in step:
            if not isinstance(step["eval"], str):
                raise ValueError(f"{where}: eval must be a string")
        else:
            _check_locator(step.get("from"), where + ".from")
            read = step.get("read")
            if not isinstance(read, str) or (read not in READS and not read.startswith("attribute:")):
                raise ValueError(f"{where}: unknown read {read!r}")
        known.add(step["save"])
    elif kind == "expect":
        if step["expect"] not in EXPECTS:
            raise ValueError(f"{where}: unknown expectation {step['expect']!r}")
        _check_locator(step.get("locator"), where + ".locator")
        if step["expect"] in ("text", "contains_text", "value", "class", "count", "attribute", "css"):
            if "value" not in step:
                raise ValueError(f"{where}: '{step['expect']}' needs a value")
        if "value" in step:
            _check_value(step["value"], known, where + ".value")
        if step["expect"] == "count" and not (
                isinstance(step["value"], dict) and "var" in step["value"]
                or _number(step["value"]) and float(step["value"]).is_integer()):
            raise ValueError(f"{where}: 'count' needs a whole number, got {step['value']!r}")
        if step["expect"] in ("attribute", "css") and not isinstance(step.get("name"), str):
            raise ValueError(f"{where}: '{step['expect']}' needs a name")
    elif kind == "assert":
        if step["assert"] not in ASSERTS:
            raise ValueError(f"{where}: unknown assertion {step['assert']!r}")
        if "digits" in step and not (isinstance(step["digits"], int)
                                     and not isinstance(step["digits"], bool)
                                     and 0 <= step["digits"] <= 15):
            raise ValueError(f"{where}.digits: an integer from 0 to 15")
        _check_value(step.get("left"), known, where + ".left")
        if step["assert"] not in ("truthy", "falsy"):
            _check_value(step.get("right"), known, where + ".right")
    elif kind == "retry":
        if not isinstance(step["retry"], list) or not step["retry"]:
            raise ValueError(f"{where}: retry needs a list of steps")
        if "timeout_ms" in step and not (_number(step["timeout_ms"]) and step["timeout_ms"] > 0):
            raise ValueError(f"{where}.timeout_ms: a positive number")
        if depth >= MAX_RETRY_DEPTH:
            raise ValueError(f"{where}: retry blocks nested more than {MAX_RETRY_DEPTH} deep")
        for j, inner in enumerate(step["retry"]):
            _check_step(inner, known, f"{where}.retry[{j}]", depth + 1)


def check_probe(probe: Any) -> None:
    """Raises ProbeError naming the first malformed step of a probe."""
    if not isinstance(probe, dict) or not isinstance(probe.get("steps"), list):
        raise ProbeError(None, "a probe is {\"steps\": [...], \"timeout_ms\": N}")
    timeout = probe.get("timeout_ms", 5000)
    if not _number(timeout) or timeout <= 0:
        raise ProbeError(None, f"timeout_ms must be a positive number, got {timeout!r}")
    known: set[str] = set()
    for i, step in enumerate(probe["steps"]):
        try:
            _check_step(step, known, f"steps[{i}]")
        except ValueError as e:
            raise ProbeError(i, str(e)) from None
