"""Judge findings beside execution evidence of the same rubric (``localize/corroborate.py``).

Stated as intents over one app: which code ends up direct or context when a probe failure and
a judge finding of one rubric blame the same code, or different code.
"""

from __future__ import annotations

from evaluators.localize.api import localize_diagnostics
from evaluators.localize.rules import LocalizeConfig
from tests.localize.diags import probe_failure
from tests.localize.test_rule_intents import CALLER

# A handler calling a writer of #out, an unrelated constant, and a function nothing calls.
TINT = "function tint() { document.body.style.color = colour; }"
APP = CALLER.replace("const colour = 'red';", "const colour = 'red';\n" + TINT)
CHECK = {"expect": "text", "locator": "#out", "value": "1"}


def _code(text: str) -> tuple[int, int]:
    start = APP.index(text)
    return start, start + len(text)


def _judge(quote: str, rubric: str = "r", handler: str | None = None) -> dict:
    return {"kind": "judge_finding", "reason": "judge_finding", "stage": "rubric",
            "severity": "severe", "message": "m", "rubric_id": rubric, "evidence_code": quote,
            "handler": handler}


def _localize(*diagnostics, cfg=LocalizeConfig()) -> list[dict]:
    record = {"task_id": "t", "response": APP, "status": "ok", "diagnostics": list(diagnostics),
              "extraction": {"start": 0, "end": len(APP), "method": "bare"}}
    return localize_diagnostics(record, "text", rules=cfg)


def _inside(code, spans) -> bool:
    return any(s <= code[0] and code[1] <= e for s, e in spans)


def _meets(code, spans) -> bool:
    return any(s < code[1] and code[0] < e for s, e in spans)


PROBE = probe_failure(CHECK, {"do": "click", "locator": "#go"})


def test_the_failures_context_that_the_judge_quotes_becomes_direct():
    """add is a callee of the blamed handler: context of the probe failure. The judge quotes
    its body: with the rule, the probe failure blames it directly too."""
    body = _code("return x + 1;")
    off, _ = _localize(PROBE, _judge("return x + 1;"), cfg=LocalizeConfig({"judge.corroborate"}))
    assert _inside(body, off["s_ctx"]) and not _meets(body, off["s_dir"])
    probe, judge = _localize(PROBE, _judge("return x + 1;"))
    assert _inside(body, probe["s_dir"]) and _inside(body, judge["s_dir"])
    assert any(e["rule"] == "judge.corroborate" and tuple(e["span"]) == body
               for e in probe["evidence"])


def test_the_judges_context_that_execution_blames_directly_becomes_direct():
    """The judge quotes ``show();``: its context is the handler onGo, which the probe failure
    blames directly, so the judge's finding blames onGo directly too."""
    on_go = _code("function onGo() { total = add(total); show(); }")
    _, off = _localize(PROBE, _judge("show();"), cfg=LocalizeConfig({"judge.corroborate"}))
    assert not _inside(on_go, off["s_dir"])  # alone: the quote direct, onGo its context
    assert _meets(on_go, off["s_ctx"])
    _, judge = _localize(PROBE, _judge("show();"))
    assert _inside(on_go, judge["s_dir"])


def test_a_handler_only_named_is_context_when_execution_blames_other_code():
    """The quote is not in the app, so the named handler is the judge's only pointer (direct
    alone); execution blamed other code directly and none of tint: tint becomes context."""
    tint = _code(TINT)
    finding = _judge("repaint(everything);", handler="tint")
    off = _localize(PROBE, finding, cfg=LocalizeConfig({"judge.corroborate"}))[1]
    assert _inside(tint, off["s_dir"])  # alone, the named handler is direct
    probe, judge = _localize(PROBE, finding)
    assert not _meets(tint, judge["s_dir"]) and _inside(tint, judge["s_ctx"])
    assert not _meets(tint, probe["s_dir"])
    moved = [e for e in judge["evidence"] if e["rule"] == "judge.corroborate"]
    assert [tuple(e["span"]) for e in moved] == [tint] and moved[0]["set"] == "ctx"


def test_a_quote_found_in_the_app_stays_direct_without_execution_support():
    """A quote is evidence of its own: where execution blamed other code, it is still direct."""
    colour = _code("const colour = 'red';")
    _, judge = _localize(PROBE, _judge("const colour = 'red';"))
    assert _inside(colour, judge["s_dir"])
    assert not any(e["rule"] == "judge.corroborate" for e in judge["evidence"])


def test_without_direct_execution_blame_the_judges_spans_stand():
    """A finding of another rubric, or of a rubric whose failure blamed nothing directly, is
    not changed."""
    colour = _code("const colour = 'red';")
    _, judge = _localize(PROBE, _judge("const colour = 'red';", rubric="other"))
    assert _inside(colour, judge["s_dir"])
    nothing = probe_failure({"expect": "text", "locator": "#absent", "value": "1"}, None)
    _, judge = _localize(nothing, _judge("const colour = 'red';"))
    assert _inside(colour, judge["s_dir"])


def test_execution_blame_keeps_its_set():
    probe_alone = _localize(PROBE)[0]
    probe, _ = _localize(PROBE, _judge("const colour = 'red';"))
    assert probe["s_dir"] == probe_alone["s_dir"]
    assert probe["s_ctx"] == probe_alone["s_ctx"]
