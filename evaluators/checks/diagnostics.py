"""Diagnostics built from what a page did: stack frames in response coordinates, page
errors, the sandbox's info findings and a probe's failing step (docs/result-record.md), as
`evaluators.contract.Diagnostic` JSON objects."""

from __future__ import annotations

from evaluators.sandbox.browser import APP_URL, PageWatch
from evaluators.contract import Diagnostic, JsException, Reason
from evaluators.checks.extract import Extraction
from evaluators.checks.probes import StepFailure
from evaluators.checks.steps import describe_locator, locator_css
from evaluators.tasks import Rubric
from evaluators.checks.textindex import TextIndex


class Frames:
    """Maps stack frames of the served app to response coordinates."""

    def __init__(self, extraction: Extraction):
        self.extraction = extraction
        self.index = TextIndex(extraction.code)

    def frames(self, raw: list[dict]) -> list[dict]:
        out = []
        for f in raw:
            f = dict(f)
            in_app = f["url"].split("#", 1)[0] == APP_URL
            f["in_app"] = in_app
            offset = self.index.from_v8(f["line"], f["column"]) if in_app else None
            f["offset"] = None if offset is None else self.extraction.to_response(offset)
            out.append(f)
        return out

    def excerpt(self, frames: list[dict]) -> str | None:
        top = next((f for f in frames if f["offset"] is not None), None)
        if top is None:
            return None
        code_off = top["offset"] - self.extraction.start
        line_start = self.extraction.code.rfind("\n", 0, code_off) + 1
        line_end = self.extraction.code.find("\n", code_off)
        line = self.extraction.code[line_start:line_end if line_end >= 0 else None]
        return line.strip()[:300]


def error_diagnostic(err: dict, frames: Frames, stage: str, rubric_id: str | None) -> dict:
    mapped = frames.frames(err["frames"])
    reason = Reason.UNCAUGHT_AT_LOAD if err["interaction_index"] is None else \
        Reason.UNCAUGHT_IN_STEP
    return Diagnostic(
        kind="page_error", reason=reason, stage=stage, severity="severe", rubric_id=rubric_id,
        message=f"uncaught {err['name']}: {err['message']}"[:1000],
        step_index=err["step_index"], interaction_index=err["interaction_index"],
        frames=mapped, excerpt=frames.excerpt(mapped),
        exception=JsException.from_report(err["name"], err["message"])).to_json()


def watch_diagnostics(watch: PageWatch, stage: str, rubric_id: str | None) -> list[dict]:
    """Requests, dialogs and popups as info diagnostics."""
    out = []
    for req in watch.requests:
        reason = Reason.CDN_FALLBACK if req["kind"] == "cdn_fallback" else Reason.REFUSED_REQUEST
        out.append(Diagnostic(reason=reason, stage=stage, severity="info", rubric_id=rubric_id,
                              message=f"{req['kind'].replace('_', ' ')}: {req['url']}",
                              **req).to_json())
    for d in watch.dialogs:
        out.append(Diagnostic(kind="dialog", reason=Reason.DIALOG, stage=stage, severity="info",
                              rubric_id=rubric_id,
                              message=f"{d['type']} dialog answered: {d['message']}",
                              step_index=d["step_index"]).to_json())
    for url in watch.popups:
        out.append(Diagnostic(kind="popup_blocked", reason=Reason.REFUSED_REQUEST, stage=stage,
                              severity="info", rubric_id=rubric_id,
                              message=f"window.open blocked: {url}", url=url).to_json())
    return out


def failure_diagnostic(rubric: Rubric, failure: StepFailure, step_index: int | None,
                        step: dict | None, watch: PageWatch) -> dict:
    loc = None if step is None else step.get("locator", step.get("from"))
    action = None
    if watch.interaction is not None:
        action_step = rubric.probe["steps"][watch.interaction]
        action_loc = action_step.get("locator") or (action_step.get("at") or {}).get("box")
        action = {"step_index": watch.interaction, "step": action_step,
                  "locator": describe_locator(action_loc) if action_loc else None,
                  "selector": locator_css(action_loc)}
    return Diagnostic(
        kind="probe_failure", reason=failure.reason, stage="rubric", severity=failure.severity,
        rubric_id=rubric.id, message=str(failure), step_index=step_index, step=step,
        locator=describe_locator(loc) if loc is not None else None,
        selector=locator_css(loc), expected=failure.expected, actual=failure.actual,
        after_action=action, limit_ms=failure.limit_ms).to_json()


def caused(diagnostic: dict, cause: dict | None) -> dict:
    """`diagnostic`, marked as caused by `cause` (a diagnostic of the same record, or None).

    The mark is the cause itself until `link_causes` turns it into the cause's index, once
    the record's list of diagnostics is complete.
    """
    if cause is not None:
        diagnostic["caused_by"] = cause
    return diagnostic


def link_causes(diagnostics: list[dict]) -> None:
    """Turns the `caused` marks of a record's diagnostics into indices in its list."""
    where = {id(d): i for i, d in enumerate(diagnostics)}
    for d in diagnostics:
        cause = d.get("caused_by")
        if isinstance(cause, dict):
            d["caused_by"] = where.get(id(cause))
