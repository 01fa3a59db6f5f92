"""Writing output records: one JSON line per record, whatever the record holds.

A record carries text and values the response and its page chose: a lone UTF-16
surrogate in the response (no UTF-8 encoder accepts it), a NaN or a Date an app handed
to a probe's reading, a value nested deeper than the JSON encoder recurses. None of
these may stop a run and lose the records after it, so `dumps_record` never raises.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import re
from typing import Any

# Deeper values are cut here (a probe reading an app's object can be nested at will).
MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps_record(record: dict) -> str:
    """The record as one line of strict JSON (no NaN), readable back unchanged where it can be.

    Non-ASCII text is written as is, except that a record holding a lone surrogate is
    written with ASCII escapes throughout (``\\ud800``): strict JSON, valid UTF-8, and
    ``json.loads`` gives back the same string. Values JSON has no form for (NaN and the
    infinities, dates, other objects) become strings; values nested deeper than
    `MAX_DEPTH` are cut with a note in their place.
    """
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        record = _plain(record, 0)
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    if _SURROGATE.search(text):
        text = json.dumps(record, ensure_ascii=True, allow_nan=False)
    return text


def _plain(value: Any, depth: int) -> Any:
    """A copy of `value` that JSON can hold (see dumps_record)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value).replace("inf", "Infinity").replace(
            "nan", "NaN")
    if depth >= MAX_DEPTH:
        return f"<nested deeper than {MAX_DEPTH} levels>"
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return repr(value)[:1000]



@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema

    from evaluators.contract import SCHEMA_PATH

    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text("utf-8")))


def validate_record(record: dict) -> None:
    """Checks a record against ``schema/result.schema.json``.

    Raises:
      ValueError: naming the first invalid field by its path.
    """
    errors = sorted(_validator().iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "the record"
        raise ValueError(f"record field {where}: {errors[0].message}")
