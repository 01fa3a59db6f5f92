"""The typed contract between the evaluators and everything that reads their diagnostics.

A diagnostic says what an evaluator observed, in fields: why it failed (`Reason`), where
(stage, rubric, probe step, locator, the element acted on before), what was read
(expected, actual), the exception the page threw (`JsException`, its V8 report already
taken apart here, in the evaluator), the stack, the code line it quotes, and which earlier
diagnostic of the same record caused it (`caused_by`). The ``message`` field is prose for
people: no reader may branch on it.

The gates, the probe runner and the judge build `Diagnostic`s; records carry them as JSON
objects (`Diagnostic.to_json`). The ``diagnostic`` part of ``schema/result.schema.json``
is generated from the dataclasses here (``python -m evaluators.contract``; a test fails when
the file is stale). `read_record` loads records of every version: version 1 (no ``reason``)
is upgraded by `upgrade_v1`, the one place that reads old messages.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "result.schema.json"


class Reason(str, enum.Enum):
    """Why a diagnostic was emitted: what the localizer and the trainer branch on."""

    NO_APP = "no_app"                          # gate F: no app in the response
    SOURCE_ERROR = "source_error"              # gate S: a syntax error
    SOURCE_TIMEOUT = "source_timeout"          # gate S: the parse ran past its limit
    LOAD_FAILED = "load_failed"                # the page did not load (time, navigation)
    HANG = "hang"                              # the page stopped answering
    CRASH = "crash"                            # the renderer crashed
    TIMEOUT = "timeout"                        # a probe ran past its time limit
    UNCAUGHT_AT_LOAD = "uncaught_at_load"      # an exception thrown while loading
    UNCAUGHT_IN_STEP = "uncaught_in_step"      # an exception thrown after a probe's action
    MISSING_ELEMENT = "missing_element"        # no element matches a step's locator
    WRONG_VALUE = "wrong_value"                # an assertion read a value other than expected
    STEP_FAILED = "step_failed"                # an action could not be done (not visible, ...)
    REFUSED_REQUEST = "refused_request"        # the sandbox refused a request, navigation, popup
    DIALOG = "dialog"                          # a dialog was answered
    CDN_FALLBACK = "cdn_fallback"              # the CDN mirror served another version
    JUDGE_FINDING = "judge_finding"            # an LLM judge's issue


# Reasons that say the page itself stopped (not a wrong value): no locator can be trusted.
STOPPED = frozenset({Reason.HANG, Reason.CRASH, Reason.TIMEOUT, Reason.LOAD_FAILED})
UNCAUGHT = frozenset({Reason.UNCAUGHT_AT_LOAD, Reason.UNCAUGHT_IN_STEP})

# The reasons each kind of diagnostic may carry.
KIND_REASONS: dict[str, tuple[Reason, ...]] = {
    "no_app": (Reason.NO_APP,),
    "syntax_error": (Reason.SOURCE_ERROR,),
    "parse_timeout": (Reason.SOURCE_TIMEOUT,),
    "runtime_failure": (Reason.LOAD_FAILED, Reason.HANG, Reason.CRASH,
                        Reason.UNCAUGHT_AT_LOAD, Reason.UNCAUGHT_IN_STEP),
    "page_error": (Reason.UNCAUGHT_AT_LOAD, Reason.UNCAUGHT_IN_STEP),
    "probe_failure": (Reason.MISSING_ELEMENT, Reason.WRONG_VALUE, Reason.STEP_FAILED,
                      Reason.TIMEOUT, Reason.HANG, Reason.CRASH, Reason.LOAD_FAILED),
    "blocked_request": (Reason.REFUSED_REQUEST,),
    "navigation_blocked": (Reason.REFUSED_REQUEST,),
    "popup_blocked": (Reason.REFUSED_REQUEST,),
    "dialog": (Reason.DIALOG,),
    "cdn_fallback": (Reason.CDN_FALLBACK,),
    "judge_finding": (Reason.JUDGE_FINDING,),
}

# The fields each kind may set beyond the common ones (`_COMMON`).
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "no_app": (),
    "syntax_error": ("lang", "span"),
    "parse_timeout": ("limit_ms",),
    "runtime_failure": (),
    "page_error": ("step_index", "interaction_index", "frames", "excerpt", "exception"),
    "probe_failure": ("step_index", "step", "locator", "selector", "expected", "actual",
                      "after_action", "coverage", "writers", "limit_ms"),
    "blocked_request": ("url", "resource_type", "error"),
    "navigation_blocked": ("url",),
    "popup_blocked": ("url",),
    "dialog": ("step_index",),
    "cdn_fallback": ("url", "package", "requested", "served"),
    "judge_finding": ("step_index", "locator", "selector", "evidence_code", "evidence_line",
                      "handler", "state_var", "judge_severity"),
}

# V8's reports of the common exceptions. Taken apart here so that no reader parses them.
_NULL_READ = re.compile(r"Cannot (?:read|set) propert(?:y|ies) of (?:null|undefined)"
                        r"(?: \((?:reading|setting) '([^']*)'\))?|(\S+) is (?:null|undefined)")
_UNDEFINED_ITEM = re.compile(r"of undefined \((?:reading|setting) '([^']*)'\)")
_UNBOUND = re.compile(r"([A-Za-z_$][\w$.]*) is not (?:defined|a function|a constructor)")
_STACK_OVERFLOW = "Maximum call stack size exceeded"
# A web API (WebIDL binding) refusing its call: its arguments, or the receiver's state.
_REJECTED_CALL = re.compile(r"Failed to execute '([^']+)' on '[^']+'")
_DESTRUCTURED = re.compile(r"Cannot destructure (?:property '[^']*' of )?'(.+?)' as it is "
                           r"(?:null|undefined)")
# JsException fields added after records were written: a record may lack them (readers take
# them from the message: `JsException.from_json`), so the schema does not require them.
_EXCEPTION_FIELDS_ADDED = ("rejected_call", "destructured", "not_iterable")
# Fields whose reading of the report was widened after records were written (``undefined_item``
# took only reads at first, now writes too): a record's null there is taken from the message.
_EXCEPTION_FIELDS_WIDENED = ("undefined_item",)
# `const [a, b] = rows[i]` or `for (const x of v)` on undefined, null or a non-iterable.
_NOT_ITERABLE = re.compile(r"\bis not iterable\b")


@dataclasses.dataclass(frozen=True)
class JsException:
    """An uncaught exception as the page reported it, with V8's message taken apart.

    Attributes:
      name: The error's constructor name (``TypeError``), ``Error`` when it has none.
      message: The message as thrown (for ``throw "x"``, the value: ``x``).
      null_read: A property of null or undefined was read or set.
      read_property: The property whose read or write failed on null/undefined, if named.
      null_name: The expression reported as null/undefined (``x is null``), if named.
      undefined_item: The property read or set on an undefined value (``a[i].k`` past the
        end).
      unbound_name: The name that is not defined / not a function / not a constructor.
      stack_overflow: ``Maximum call stack size exceeded``.
      rejected_call: The web API operation that refused the call (``addEventListener`` for
        ``Failed to execute 'addEventListener' on 'EventTarget': parameter 2 ...``), if any.
      destructured: The value a destructuring found null or undefined, as V8 writes it
        (``calculateModel(...)`` for ``Cannot destructure property 'a' of
        'calculateModel(...)' as it is undefined.``), if any.
      not_iterable: An array destructuring or ``for ... of`` was handed a value it cannot
        iterate (``undefined is not iterable``): an item past an array's end, or unset.
      thrown: What the thrown value itself may have been (for a stackless throw).
    """

    name: str
    message: str
    null_read: bool = False
    read_property: str | None = None
    null_name: str | None = None
    undefined_item: str | None = None
    unbound_name: str | None = None
    stack_overflow: bool = False
    rejected_call: str | None = None
    destructured: str | None = None
    not_iterable: bool = False
    thrown: tuple[str, ...] = ()

    @classmethod
    def from_report(cls, name: str | None, message: str | None) -> "JsException":
        name, message = exception_name(name), str(message or "")
        null = _NULL_READ.search(message)
        item = _UNDEFINED_ITEM.search(message)
        unbound = _UNBOUND.search(message)
        rejected = _REJECTED_CALL.search(message)
        destructured = _DESTRUCTURED.search(message)
        return cls(name=name, message=message[:1000], null_read=null is not None,
                   read_property=null.group(1) if null else None,
                   null_name=null.group(2) if null else None,
                   undefined_item=item.group(1) if item else None,
                   unbound_name=unbound.group(1) if unbound else None,
                   stack_overflow=_STACK_OVERFLOW in message,
                   rejected_call=rejected.group(1) if rejected else None,
                   destructured=destructured.group(1) if destructured else None,
                   not_iterable=_NOT_ITERABLE.search(message) is not None,
                   thrown=_thrown_texts(name, message))

    def to_json(self) -> dict:
        """The record's JSON object (``thrown`` as a list)."""
        return {**dataclasses.asdict(self), "thrown": list(self.thrown)}

    @classmethod
    def from_json(cls, obj: dict) -> "JsException":
        """Reads ``to_json``'s object; an unknown field, or a missing name or message, is a
        ValueError naming it. A field taken from the report that the object lacks (a record
        written before that field existed) is taken from its message here, as the evaluator
        now would."""
        fields = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(obj) - fields)
        if extra:
            raise ValueError(f"field 'exception': unknown field {extra[0]!r}")
        for k in ("name", "message"):
            if k not in obj:
                raise ValueError(f"field 'exception': missing field {k!r}")
        now = dataclasses.asdict(cls.from_report(obj["name"], obj["message"]))
        obj = {k: v for k, v in obj.items() if v is not None or k not in _EXCEPTION_FIELDS_WIDENED}
        return cls(**{**now, **obj, "name": exception_name(obj["name"]),
                      "thrown": tuple(obj["thrown"] if "thrown" in obj else now["thrown"])})


def exception_name(name: str | None) -> str:
    """The constructor name of a reported exception. Where Chromium reports an error it
    could not take apart (some thrown inside a library, or rejected promises), the name
    comes with its report's prefix (``Uncaught TypeError``, ``Uncaught (in promise) Error``):
    the prefix says how it surfaced, not what it is, and is dropped."""
    return re.sub(r"^Uncaught\s+(?:\(in promise\)\s*)?", "", str(name or "").strip()) or "Error"


def _thrown_texts(name: str, message: str) -> tuple[str, ...]:
    """What a stackless exception's report can say the thrown value was: Chromium reports
    ``throw 7`` as ``Uncaught 7`` and may prefix a constructor name."""
    out = {message, f"{name}: {message}"}
    for pattern in (r"^Uncaught\s+", r"^(?:Uncaught\s+)?\w*:\s*", r"^Error:\s*"):
        out.add(re.sub(pattern, "", message.strip()))
    return tuple(sorted({x.strip()[:1000] for x in out if x.strip()}))


def _field(schema: dict, description: str, default: Any = None) -> Any:
    return dataclasses.field(default=default, metadata={"schema": schema, "doc": description})


_NULLABLE_INDEX = {"$ref": "#/$defs/nullable_index"}
_NULLABLE_STRING = {"$ref": "#/$defs/nullable_string"}


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One finding of an evaluator (see the module docstring; per-kind rules in the schema)."""

    kind: str = _field({"enum": list(KIND_REASONS)}, "which check emitted it")
    reason: Reason = _field({}, "why (Reason)")
    stage: str = _field({"enum": ["format", "source", "runtime", "rubric"]}, "the gate or stage")
    severity: str = _field({"enum": ["severe", "moderate", "minor", "info"]}, "how bad")
    message: str = _field({"type": "string"}, "prose for people; never parsed")
    rubric_id: str | None = _field(_NULLABLE_STRING, "the rubric, null outside the rubric stage")
    caused_by: int | None = _field(_NULLABLE_INDEX,
                                   "index in the record's diagnostics of the one that caused it")
    step_index: int | None = _field(_NULLABLE_INDEX, "the probe step that failed or threw")
    interaction_index: int | None = _field(_NULLABLE_INDEX, "the last action before a throw")
    step: dict | None = _field({"type": ["object", "null"]}, "the failing probe step")
    locator: str | None = _field(_NULLABLE_STRING, "the step's locator, described")
    selector: str | None = _field(_NULLABLE_STRING, "the step's locator as CSS, if it has one")
    expected: Any = _field(True, "what the step expected")
    actual: Any = _field(True, "what the page showed")
    after_action: dict | None = _field({"type": ["object", "null"]},
                                       "the element acted on before the failure")
    coverage: dict | None = _field({"type": ["object", "null"]}, "functions that ran")
    writers: list | None = _field({"type": "array", "items": {"$ref": "#/$defs/write"}},
                                  "the checked element's recorded DOM writes")
    exception: JsException | None = _field({"oneOf": [{"$ref": "#/$defs/js_exception"},
                                                      {"type": "null"}]}, "the thrown exception")
    frames: list | None = _field({"type": "array", "items": {"$ref": "#/$defs/frame"}},
                                 "the exception's stack, top first")
    excerpt: str | None = _field(_NULLABLE_STRING, "the app's line at the top in-app frame")
    evidence_code: str | None = _field(_NULLABLE_STRING, "code a judge quoted from the response")
    evidence_line: int | None = _field(_NULLABLE_INDEX,
                                       "the app-source line (1-based) the judge gave its quote")
    handler: str | None = _field(_NULLABLE_STRING, "a function or handler the judge named")
    state_var: str | None = _field(_NULLABLE_STRING, "a state variable the judge named")
    judge_severity: str | None = _field({"enum": ["minor", "major", "critical"]},
                                        "the judge's own word for the severity")
    lang: str | None = _field({"enum": ["javascript", "css"]}, "a syntax error's language")
    span: list | None = _field({"type": "array"}, "[start, end) in response coordinates")
    limit_ms: float | None = _field({"type": "number"}, "the limit that ran out")
    url: str | None = _field({"type": "string"}, "a refused or substituted request's URL")
    resource_type: str | None = _field({"type": "string"}, "a refused request's type")
    error: str | None = _field({"type": "string"}, "Chromium's network error")
    package: str | None = _field({"type": "string"}, "a CDN fallback's package")
    requested: str | None = _field({"type": "string"}, "the version asked for")
    served: str | None = _field({"type": "string"}, "the version served")

    def __post_init__(self):
        reason = Reason(self.reason)
        object.__setattr__(self, "reason", reason)
        if self.kind not in KIND_REASONS:
            raise ValueError(f"diagnostic field 'kind': unknown kind {self.kind!r}")
        if reason not in KIND_REASONS[self.kind]:
            allowed = [r.value for r in KIND_REASONS[self.kind]]
            raise ValueError(f"diagnostic field 'reason': {reason.value!r} is not a reason "
                             f"of kind {self.kind!r} ({allowed})")
        for f in dataclasses.fields(self):
            if (f.name not in _COMMON and f.name not in KIND_FIELDS[self.kind]
                    and getattr(self, f.name) is not None):
                raise ValueError(f"diagnostic field {f.name!r}: not a field of kind {self.kind!r}")

    def to_json(self) -> dict:
        """The record's JSON object: the common fields, then the others that are set.

        ``__post_init__`` already refused fields foreign to the kind, so only which unset
        (None) fields to leave out is decided here."""
        keep = _ALWAYS + _KIND_KEYS.get(self.kind, ())
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None and f.name not in keep:
                continue
            out[f.name] = v.to_json() if isinstance(v, JsException) else \
                v.value if isinstance(v, Reason) else v
        return out

    @classmethod
    def from_json(cls, obj: dict, where: str = "diagnostic") -> "Diagnostic":
        """Reads one diagnostic of the current version; errors name the field."""
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: not an object")
        fields = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(obj) - fields - set(LOCALIZATION_FIELDS))
        if extra:
            raise ValueError(f"{where}: unknown field {extra[0]!r}")
        kw = {k: v for k, v in obj.items() if k in fields}
        for k in ("kind", "reason", "stage", "severity", "message"):
            if k not in kw:
                raise ValueError(f"{where}: missing field {k!r}")
        try:
            if isinstance(kw.get("exception"), dict):
                kw["exception"] = JsException.from_json(kw["exception"])
            return cls(**kw)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None


# Written even when null: the common fields, and the fields a kind always has.
_ALWAYS = ("kind", "reason", "stage", "severity", "message", "rubric_id")
_COMMON = _ALWAYS + ("caused_by",)
# Which rubric a diagnostic names, by stage (a gate failure may name the core rubric).
_STAGE_RULES = [
    {"if": {"properties": {"stage": {"const": "rubric"}}, "required": ["stage"]},
     "then": {"properties": {"rubric_id": {"type": "string"}}}},
    {"if": {"properties": {"stage": {"enum": ["format", "source", "runtime"]},
                           "kind": {"not": {"const": "runtime_failure"}}},
            "required": ["stage", "kind"]},
     "then": {"properties": {"rubric_id": {"const": None}}}}]
_KIND_KEYS = {
    "page_error": ("step_index", "interaction_index", "frames", "excerpt", "exception"),
    "probe_failure": ("step_index", "step", "locator", "selector", "expected", "actual",
                      "after_action"),
}
# What localization adds to a diagnostic (evaluators.localize.api).
LOCALIZATION_FIELDS = ("s_dir", "s_ctx", "evidence", "weighted")


def read_record(record: dict, where: str = "record") -> dict:
    """A record of any version, as the current version (a copy when it had to change).

    Raises:
      ValueError: naming the record and field, for an unknown version or a bad diagnostic.
    """
    version = record.get("schema_version", 1)
    if version == 1:
        record = upgrade_v1(record)
    elif version != SCHEMA_VERSION:
        raise ValueError(f"{where}: field 'schema_version': unknown version {version!r} "
                         f"(this reader knows 1 and {SCHEMA_VERSION})")
    for i, d in enumerate(record.get("diagnostics") or ()):
        Diagnostic.from_json(d, f"{where}: diagnostics[{i}]")
    return record


_V1_PROBE_REASONS = (  # (words of a version-1 message, its reason), first match wins
    ("renderer crashed", Reason.CRASH), ("stopped answering", Reason.HANG),
    ("no element matches", Reason.MISSING_ELEMENT), ("timed out", Reason.TIMEOUT),
    ("did not load", Reason.LOAD_FAILED), ("left for", Reason.LOAD_FAILED),
    ("did not answer an evaluation", Reason.HANG), ("assert ", Reason.WRONG_VALUE),
    ("expected a number", Reason.WRONG_VALUE))
_V1_RUNTIME_REASONS = (
    ("uncaught exception during load", Reason.UNCAUGHT_AT_LOAD),
    ("uncaught exception during an interaction", Reason.UNCAUGHT_IN_STEP),
    ("renderer crashed", Reason.CRASH), ("stopped answering", Reason.HANG))
_V1_LIMIT = re.compile(r"the probe timed out after ([\d.]+) ms")
_V1_FIXED = {"no_app": Reason.NO_APP, "syntax_error": Reason.SOURCE_ERROR,
             "parse_timeout": Reason.SOURCE_TIMEOUT, "blocked_request": Reason.REFUSED_REQUEST,
             "navigation_blocked": Reason.REFUSED_REQUEST, "popup_blocked": Reason.REFUSED_REQUEST,
             "dialog": Reason.DIALOG, "cdn_fallback": Reason.CDN_FALLBACK}


def upgrade_v1(record: dict) -> dict:
    """A version-1 record (no reasons) as version 2: reasons, exceptions and causes from the
    messages version 1 wrote (the only reader of messages, and only of old records)."""
    diags = [dict(d) for d in record.get("diagnostics") or ()]
    for d in diags:
        if "reason" not in d:
            d["reason"] = _v1_reason(d).value
        if d.get("kind") == "page_error" and "exception" not in d:
            report = re.sub(r"^uncaught\s+", "", str(d.get("message") or ""))
            name, _, message = report.partition(": ")
            exc = JsException.from_report(name, message) if message else \
                JsException.from_report("Error", name)
            d["exception"] = exc.to_json()
        timed_out = _V1_LIMIT.search(str(d.get("message") or ""))
        if d.get("kind") == "probe_failure" and timed_out and "limit_ms" not in d:
            d["limit_ms"] = float(timed_out.group(1))
    thrown = {d.get("message"): i for i, d in enumerate(diags)
              if d.get("kind") == "page_error" and d.get("stage") == "runtime"}
    prefix = "uncaught exception during load: "
    for d in diags:
        message = str(d.get("message") or "")
        if d.get("kind") == "runtime_failure" and message.startswith(prefix):
            d.setdefault("caused_by", thrown.get(message[len(prefix):]))
    return {**record, "diagnostics": diags, "schema_version": SCHEMA_VERSION}


def _v1_reason(d: dict) -> Reason:
    kind, message = d.get("kind"), str(d.get("message") or "")
    if kind in _V1_FIXED:
        return _V1_FIXED[kind]
    if kind == "page_error":
        return Reason.UNCAUGHT_AT_LOAD if d.get("stage") == "runtime" else Reason.UNCAUGHT_IN_STEP
    table = _V1_RUNTIME_REASONS if kind == "runtime_failure" else _V1_PROBE_REASONS
    found = next((r for words, r in table if words in message), None)
    if found is not None:
        return found
    if kind == "runtime_failure":
        return Reason.LOAD_FAILED
    return Reason.WRONG_VALUE if d.get("expected") is not None else Reason.STEP_FAILED


# --- the generated schema ------------------------------------------------------------------


def _schema_of_type(tp: Any) -> dict:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if origin is tuple:
        return {"type": "array", "items": _schema_of_type(args[0])}
    if args and type(None) in args:
        inner = [a for a in args if a is not type(None)][0]
        return {"type": [_schema_of_type(inner)["type"], "null"]}
    raise TypeError(f"no schema for {tp!r}")


def diagnostic_defs() -> dict:
    """The ``$defs`` the dataclasses generate: ``diagnostic`` and ``js_exception``."""
    hints = typing.get_type_hints(JsException)
    js = {"type": "object", "description": JsException.__doc__.splitlines()[0],
          "required": [f.name for f in dataclasses.fields(JsException)
                       if f.name not in _EXCEPTION_FIELDS_ADDED],
          "additionalProperties": False,
          "properties": {f.name: _schema_of_type(hints[f.name])
                         for f in dataclasses.fields(JsException)}}
    props, by_name = {}, {f.name: f for f in dataclasses.fields(Diagnostic)}
    for f in dataclasses.fields(Diagnostic):
        schema = dict(f.metadata["schema"]) if f.metadata["schema"] is not True else {}
        if f.name == "reason":
            schema = {"enum": [r.value for r in Reason]}
        props[f.name] = {**schema, "description": f.metadata["doc"]} if schema else \
            {"description": f.metadata["doc"]}
    for name in LOCALIZATION_FIELDS:
        props[name] = {"description": "added by localization (evaluators.localize.api)"}
    common = {k: v for k, v in props.items() if k in _COMMON or k in LOCALIZATION_FIELDS}
    rules = [{"if": {"properties": {"kind": {"const": k}}, "required": ["kind"]},
              "then": {"properties": {"reason": {"enum": [r.value for r in reasons]},
                                      **{n: props[n] for n in KIND_FIELDS[k] if n in by_name}},
                       "required": [n for n in _KIND_KEYS.get(k, ())]}}
             for k, reasons in KIND_REASONS.items()]
    refs = [{"if": {"properties": {"kind": {"const": k}}, "required": ["kind"]},
             "then": {"$ref": f"#/$defs/{k}"}} for k in KIND_REASONS if k != "judge_finding"]
    diag = {"type": "object",
            "description": "One finding (generated from evaluators.contract.Diagnostic; the "
                           "per-kind definitions below refine it).",
            "required": list(_ALWAYS), "unevaluatedProperties": False,
            "properties": common, "allOf": rules + _STAGE_RULES + refs}
    return {"diagnostic": diag, "js_exception": js}


def generated_schema(schema: dict) -> dict:
    """`schema` with its generated parts replaced by what the dataclasses say now."""
    out = json.loads(json.dumps(schema))
    out["$defs"].update(diagnostic_defs())
    out["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    out["$id"] = f"urn:rcca:evaluators:result-record:{SCHEMA_VERSION}"
    out["title"] = f"rcca evaluator output record (schema_version {SCHEMA_VERSION})"
    return out


def main(argv: list[str]) -> int:
    """``python -m evaluators.contract [--check]``: writes (or checks) the generated schema."""
    current = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    fresh = generated_schema(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{SCHEMA_PATH.name} is stale: run python -m evaluators.contract")
            return 1
        return 0
    SCHEMA_PATH.write_text(_pretty(fresh) + "\n", encoding="utf-8")
    return 0


def _pretty(value: Any, indent: int = 0, width: int = 100) -> str:
    """JSON with objects and arrays that fit on one line kept on one line (readable diffs)."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        items = [pad + _pretty(v, indent + 2, width) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    items = [f"{pad}{json.dumps(k)}: {_pretty(v, indent + 2, width)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
