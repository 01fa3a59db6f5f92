"""localize_record: which diagnostics are localized and weighted, token weights, speed."""

from __future__ import annotations


import numpy as np
import pytest

from evaluators.localize.api import counts_for_weights, localize_record, weights_from_spans
from evaluators.localize.weights import WeightConfig
from tests.localize.diags import exception

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

EOS = 256

RESPONSE = """Sure.

```html
<button id="inc">+</button> <span id="out">0</span>
<script>
let count = 0;
const out = document.getElementById('out');
function onInc() {
  count -= 1;
  out.textContent = count;
}
document.getElementById('inc').addEventListener('click', onInc);
</script>
```
"""
START = RESPONSE.index("<button")
END = RESPONSE.index("```\n", START)


def span(sub: str) -> tuple[int, int]:
    start = RESPONSE.index(sub)
    return start, start + len(sub)


@pytest.fixture(scope="module")
def tok():
    """A byte-level BPE without merges: every byte is one token (EOS is id 256)."""
    alphabet = set(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    extra = iter(sorted(c for c in alphabet if ord(c) >= 256))
    chars = [chr(b) if chr(b) in alphabet else next(extra) for b in range(256)]
    model = tokenizers.models.BPE(vocab={c: b for b, c in enumerate(chars)}, merges=[])
    t = tokenizers.Tokenizer(model)
    t.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = tokenizers.decoders.ByteLevel()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<|eos|>")
    assert fast.eos_token_id == EOS
    return fast


def failure(rubric_id: str, **kw) -> dict:
    return {"kind": "probe_failure", "reason": "wrong_value", "stage": "rubric",
            "severity": "moderate", "rubric_id": rubric_id, "message": "expect failed", "step_index": 1,
            "step": {"expect": "text", "locator": "#out", "value": "1"}, "locator": "#out",
            "selector": "#out", "expected": "1", "actual": "-1", "coverage": None,
            "after_action": {"step_index": 0, "step": {"do": "click", "locator": "#inc"},
                             "locator": "#inc", "selector": "#inc"}, **kw}


def record(**kw) -> dict:
    rec = {
        "task_id": "t", "response": RESPONSE, "reward": 0.5, "gate": None, "status": "ok",
        "rubrics": [{"id": "inc", "verdict": "fail", "importance": "core"},
                    {"id": "ok", "verdict": "pass", "importance": "behavior",
                     "runtime_error": False}],
        "diagnostics": [
            failure("inc"),
            {"kind": "dialog", "reason": "dialog", "stage": "rubric", "severity": "info", "rubric_id": "inc",
             "message": "alert dialog answered: hi", "step_index": 0},
            {"kind": "page_error", "reason": "uncaught_in_step", "stage": "rubric",
             "severity": "severe", "rubric_id": "ok", "message": "uncaught Error: x",
             "exception": exception("Error: x"), "step_index": 1, "interaction_index": 0,
             "frames": [
                 {"in_app": True, "offset": span("count -= 1;")[0]}], "excerpt": "count -= 1;"},
        ],
        "extraction": {"start": START, "end": END, "method": "fenced"},
    }
    rec.update(kw)
    return rec


def test_localizes_every_localizable_diagnostic_and_weights_the_failing_ones(tok):
    rec = record()
    out = localize_record(rec, tokenizer=tok)
    assert "s_dir" not in rec["diagnostics"][0]  # the input record is not changed
    probe, dialog, error = out["diagnostics"]
    assert "s_dir" not in dialog and "weighted" not in dialog
    assert (probe["weighted"], error["weighted"]) == (True, False)  # error: a passing rubric
    assert error["s_dir"] == [list(span("count -= 1;"))]
    handler = span("function onInc() {\n  count -= 1;\n  out.textContent = count;\n}")
    binding = span("document.getElementById('inc').addEventListener('click', onInc)")
    assert probe["s_dir"] == [list(handler), list(binding)]
    w = np.asarray(out["weights_base"])
    assert len(w) == len(RESPONSE.encode()) == len(out["diagnosed"])  # one token per byte
    assert set(w[handler[0]:handler[1]]) == {3.0} and set(w[binding[0]:binding[1]]) == {3.0}
    assert set(w[span('<span id="out">0</span>')[0]:span('<span id="out">0</span>')[1]]) == {1.5}
    assert w[0] == 1.0 and not out["diagnosed"][0]
    assert out["localization"] == {"method": "grounded"}


def test_two_diagnostics_accumulate_up_to_the_cap(tok):
    rec = record(gate="runtime", rubrics=[{"id": "inc", "verdict": "fail"},
                                          {"id": "ok", "verdict": "pass", "runtime_error": True}])
    out = localize_record(rec, tokenizer=tok)
    assert out["diagnostics"][2]["weighted"]
    w = np.asarray(out["weights_base"])
    at = span("count -= 1;")[0]
    assert w[at] == WeightConfig().cap  # 1 + 2 + 2 capped at 4
    cfg = WeightConfig(direct=2.0, context=1.2, cap=10.0)
    w = np.asarray(localize_record(rec, tokenizer=tok, cfg=cfg)["weights_base"])
    assert w[at] == pytest.approx(3.0)


def test_sampled_token_ids_from_the_record(tok):
    ids = list(RESPONSE.encode()) + [EOS]
    out = localize_record(record(token_ids=ids), tokenizer=tok)
    assert len(out["weights_base"]) == len(ids)
    assert out["weights_base"][-1] == 1.0 and out["diagnosed"][-1] is False
    explicit = localize_record(record(), tokenizer=tok, token_ids=ids)
    assert explicit["weights_base"] == out["weights_base"]
    with pytest.raises(ValueError):
        localize_record(record(token_ids=ids[1:]), tokenizer=tok)


def test_counting_rules():
    rec = record(gate="source")
    css = {"kind": "syntax_error", "severity": "minor", "lang": "css", "span": [0, 1]}
    js = {"kind": "syntax_error", "severity": "severe", "lang": "javascript", "span": [0, 1]}
    assert not counts_for_weights(rec, css) and counts_for_weights(rec, js)
    assert counts_for_weights(rec, {"kind": "page_error", "stage": "runtime"})
    assert counts_for_weights(rec, {"kind": "runtime_failure", "severity": "severe"})
    assert not counts_for_weights(rec, {"kind": "blocked_request", "severity": "info"})
    assert not counts_for_weights(rec, failure("ok"))  # its rubric passed
    assert not counts_for_weights(rec, failure("unknown"))


def test_no_app_and_passing_records(tok):
    text = "I cannot do that."
    rec = {"response": text, "gate": "format", "rubrics": [], "extraction": None,
           "diagnostics": [{"kind": "no_app", "reason": "no_app", "stage": "format",
                           "severity": "severe", "message": "no app found"}],
           "schema_version": 2}
    out = localize_record(rec, tokenizer=tok)
    assert out["diagnostics"][0]["s_dir"] == [] and out["diagnostics"][0]["weighted"]
    assert out["weights_base"] == [1.0] * len(text)
    passing = record(rubrics=[{"id": "inc", "verdict": "pass"}], diagnostics=[])
    assert set(localize_record(passing, tokenizer=tok)["weights_base"]) == {1.0}


def test_weights_from_spans_matches_masks():
    ranges = np.array([[0, 2], [2, 4], [4, 6], [6, 6]])
    w, diagnosed = weights_from_spans(ranges, [([[0, 1]], [[4, 5]]), ([], [])])
    assert w.tolist() == [3.0, 1.0, 1.5, 1.0]
    assert diagnosed.tolist() == [True, False, True, False]
