"""The registry of localization rules: stable ids on every blamed span, and ablation."""

from __future__ import annotations

import pytest

from evaluators.localize.graph import build_graph
from evaluators.localize.rules import RULES, LocalizeConfig, rule
from evaluators.localize.spans import METHODS, localize
from tests.localize.diags import exception, probe_failure, rules_of, span

# An app whose click handler calls a misspelt function: named_in_message blames the
# function named like it, the stack rules blame the call.
TEXT = """<button id="go">go</button><p id="out"></p>
<script>
function render() { document.getElementById('out').textContent = 'ok'; }
function onGo() { rendr(); }
document.getElementById('go').addEventListener('click', onGo);
</script>"""


def _error() -> dict:
    return {"kind": "page_error", "reason": "uncaught_in_step", "stage": "rubric",
            "rubric_id": "r", "severity": "severe", "message": "uncaught ReferenceError",
            "exception": exception("ReferenceError: rendr is not defined"),
            "frames": [{"in_app": True, "offset": span("rendr();", TEXT)[0]}]}


def test_every_blamed_span_names_a_registered_rule():
    g = build_graph(TEXT)
    diags = [_error(), probe_failure({"expect": "text", "locator": "#out", "value": "ok"},
                                     {"do": "click", "locator": "#go"})]
    # The spectrum method reads which code failing and passing probes ran, and only that.
    path = lambda *names: {"functions": [  # noqa: E731
        {"start": f.span[0], "end": f.span[1], "count": 1} for n in names
        for f in g.functions_named(n)], "skipped": []}
    spectrum = {"coverage": path("onGo"),
                "spectrum": {"failing": [path("onGo")], "passing": [path("render")]}}
    for d in diags:
        for method in METHODS:
            if d["kind"] not in METHODS[method]:
                continue  # a method that does not localize this kind
            extra = {"sbfl": spectrum, "oracle": {"sft_bug": {
                "kind": "handler", "before": "onGo() { ", "new": "rendr", "after": "(); }"}}}
            loc = localize(g, {**d, **extra.get(method, {})}, method)
            assert loc.evidence, (d["kind"], method)
            assert all(r in RULES for e in loc.evidence for r in rules_of(e)), loc.evidence


def test_a_rule_switched_off_blames_nothing_and_the_others_still_run():
    g = build_graph(TEXT)
    on = localize(g, _error())
    similar = [e for e in on.evidence if e["rule"] == "errors.named_in_message"]
    assert [e["span"] for e in similar] == [list(g.functions_named("render")[0].span)]
    off = localize(g, _error(), cfg=LocalizeConfig({"errors.named_in_message"}))
    assert not any(e["rule"] == "errors.named_in_message" for e in off.evidence)
    assert span("rendr();", TEXT) in off.s_dir  # the stack rules are unaffected
    assert off.s_ctx != on.s_ctx


@pytest.mark.parametrize("method", ["text", "grounded", "naive"])
def test_any_one_rule_switched_off_still_localizes(method):
    """Ablation runs every chain with each rule off: no step may depend on another rule
    having run (the benchmark's ablation table switches each off in turn)."""
    g = build_graph(TEXT)
    cov = {"functions": [{"name": f.name, "start": f.span[0], "end": f.span[1], "count": 1}
                         for f in g.functions_named("onGo")]}
    check = {"expect": "text", "locator": "#out", "value": "ok"}
    diags = [_error(), probe_failure(check, {"do": "click", "locator": "#go"}),
             probe_failure(check, {"do": "click", "locator": "#go"}, coverage=cov),
             probe_failure({"expect": "visible", "locator": "#gone"}, None,
                           reason="missing_element"),
             {"kind": "runtime_failure", "reason": "hang", "message": "hung"},
             {"kind": "judge_finding", "reason": "judge_finding", "message": "m",
              "evidence_code": "rendr();", "evidence_line": 4, "handler": "render",
              "state_var": "x", "selector": "#out"}]
    for rid in RULES:
        for d in diags:
            loc = localize(g, d, method, cfg=LocalizeConfig({rid}))
            assert not any(rid in rules_of(e) for e in loc.evidence), (rid, d["kind"])


def test_a_demotion_names_the_rule_that_demoted():
    """Grounding moves a blamed handler that did not run to the context, and says so."""
    g = build_graph(TEXT)
    ran_render = {"functions": [{"name": "render", "start": f.span[0], "end": f.span[1],
                                 "count": 1} for f in g.functions_named("render")]}
    d = probe_failure({"expect": "text", "locator": "#out", "value": "ok"},
                      {"do": "click", "locator": "#go"}, coverage=ran_render)
    loc = localize(g, d)
    on_go = list(g.functions_named("onGo")[0].span)
    demoted = [e for e in loc.evidence if e["span"] == on_go]
    assert demoted and all(e["set"] == "ctx" for e in demoted), loc.evidence
    assert {e.get("demoted_by") for e in demoted} == {"probe.ground"}
    assert all(e["rule"] != "probe.ground" for e in demoted)


def test_unknown_or_twice_registered_rules_are_errors():
    with pytest.raises(ValueError, match="unknown rule 'errors.nope'"):
        localize(build_graph(TEXT), _error(), cfg=LocalizeConfig({"errors.nope"}))
    with pytest.raises(ValueError, match="registered twice"):
        rule("errors.named_in_message")(lambda c: None)


def test_rule_ids_are_literals_in_their_modules():
    """An id is written where its rule is (renaming the function keeps it)."""
    import importlib
    import inspect

    for rid, r in RULES.items():
        source = inspect.getsource(importlib.import_module(r.module))
        assert f'@rule("{rid}"' in source or f'declare("{rid}"' in source, rid
        assert r.summary, f"{rid}: no docstring says what it blames"
    assert len(RULES) >= 45


def test_limits_are_settings_of_the_config():
    """The function of the top frame, context, is cut to its head past `long_context`."""
    g = build_graph(TEXT)
    on_go = list(g.functions_named("onGo")[0].span)
    whole = localize(g, _error())
    cut = localize(g, _error(), cfg=LocalizeConfig(long_context=10))
    assert any(e["span"] == on_go for e in whole.evidence if e["set"] == "ctx")
    assert not any(e["span"] == on_go for e in cut.evidence)
    assert any(e["span"][0] == on_go[0] and e["span"][1] < on_go[1] for e in cut.evidence)


def test_naming_words_are_settings_of_the_config():
    """How apps name things is configuration: an app whose start-up function is ``boot`` is
    read as one only when ``boot`` is listed, and names compare at the configured ratio."""
    from evaluators.localize.spans_common import similar_names

    app = """<button id="go">go</button><p id="out"></p>
<script>
function show() { document.getElementById('out').textContent = 'ok'; }
function boot() { document.getElementById('go').addEventListener('click', show); }
window.addEventListener('load', boot);
</script>"""
    g = build_graph(app)
    d = probe_failure({"expect": "text", "locator": "#out", "value": "ok"},
                      {"do": "click", "locator": "#go"}, coverage={"functions": []})
    boot = list(g.functions_named("boot")[0].span)
    default = localize(g, d)
    listed = localize(g, d, cfg=LocalizeConfig(
        entry_functions=LocalizeConfig.entry_functions | {"boot"}))
    start_up = lambda loc: [e for e in loc.evidence  # noqa: E731
                            if e["span"] == boot and e["why"] == "start-up function"]
    assert not start_up(default) and start_up(listed)
    assert similar_names("scoreLabel", "scoreLabl")
    assert not similar_names("scoreLabel", "scoreLabl", ratio=0.99)


def _unapplied_calls(sources: dict[str, str]) -> list[str]:
    """Calls of a rule or a blaming helper whose operations nobody applies.

    A rule is a generator: called without ``yield from`` (or ``Combiner.run``) its body never
    runs, and its blame is lost without an error. Finds such calls in ``sources`` (file name:
    Python source): the generator functions (those that yield), and the case's helpers
    (``c.add``, ``c.function``...), called as anything but ``yield from f(...)`` or
    ``<combiner>.run(f(...))``.
    """
    import ast

    trees = {name: ast.parse(text) for name, text in sources.items()}

    def yields(fn) -> bool:
        todo = list(ast.iter_child_nodes(fn))
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.Yield, ast.YieldFrom)):
                return True
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.extend(ast.iter_child_nodes(n))
        return False

    names = {n.name for t in trees.values() for n in t.body
             if isinstance(n, ast.FunctionDef) and yields(n)}
    # Methods that yield, by class: ``self.m(...)`` in class K, and ``c.m(...)`` (``c`` is
    # the case by convention), are generator calls when K.m (or the case's m) yields.
    methods = {(k.name, n.name) for t in trees.values() for k in t.body
               if isinstance(k, ast.ClassDef) for n in k.body
               if isinstance(n, ast.FunctionDef) and yields(n)}
    case = {m for k, m in methods if k == "_Case"}

    def generator_call(call: ast.Call, cls: str | None) -> bool:
        f = call.func
        if isinstance(f, ast.IfExp):
            return any(isinstance(b, ast.Name) and b.id in names for b in (f.body, f.orelse))
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            return (f.value.id == "c" and f.attr in case) or (
                f.value.id == "self" and (cls, f.attr) in methods)
        return isinstance(f, ast.Name) and f.id in names

    bad = []
    for path, tree in trees.items():
        parents = {ch: n for n in ast.walk(tree) for ch in ast.iter_child_nodes(n)}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            cls = parents.get(call)
            while cls is not None and not isinstance(cls, ast.ClassDef):
                cls = parents.get(cls)
            if not generator_call(call, cls.name if cls is not None else None):
                continue
            up = parents.get(call)
            applied = isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) \
                and up.func.attr == "run" and call in up.args
            if not (isinstance(up, ast.YieldFrom) or applied):
                bad.append(f"{path}:{call.lineno}: {ast.unparse(call)[:80]}")
    return bad


def test_every_rule_call_is_applied():
    """Each call of a rule (or of a helper that blames) is a ``yield from``, so its blame
    reaches the combiner; a plain call would drop it silently."""
    from pathlib import Path

    import evaluators.localize as pkg

    files = sorted(Path(pkg.__file__).parent.glob("*.py"))
    assert len(files) > 10
    assert _unapplied_calls({p.name: p.read_text() for p in files}) == []
    dropped = """
class _Case:
    def add(self, span):
        yield span

    def function(self, span):
        self.add(span)

class Other:
    def add(self, span):
        return span

    def use(self):
        self.add(1)

def helper(c):
    yield from c.add((0, 1))

def rule_a(c):
    helper(c)
    c.add((0, 1))
    yield from (helper if c else rule_a)(c)
    (helper if c else rule_a)(c)
    c.blame.run(helper(c))
"""
    assert sorted(b.split(": ")[1] for b in _unapplied_calls({"m.py": dropped})) == sorted([
        "self.add(span)", "helper(c)", "c.add((0, 1))", "(helper if c else rule_a)(c)"])


def test_a_plain_function_is_no_rule():
    """A rule must yield its blame: a plain function registered as one is refused."""
    with pytest.raises(TypeError, match="generator function"):
        rule("test.plain")(lambda c: None)
    assert "test.plain" not in RULES


def test_every_rule_is_reached_by_a_chain():
    """The registry lists where each rule runs (``reach``); a rule no chain step reaches is
    dead, except the rules over a record's diagnostics (``declare``)."""
    from evaluators.localize.reach import reach

    where = reach()
    assert where["probe.ground"] == {(m, "probe_failure", "grounding") for m in ("grounded", "ranked")}
    assert where["probe.rank"] == {("ranked", "probe_failure", "ranking")}
    assert ("naive", "probe_failure", "rules") in where["probe.naive_queries"]
    assert ("text", "probe_failure", "fallback") in where["probe.naive_queries"]
    assert {k for _, k, _ in where["errors.loops"]} == {"probe_failure", "runtime_failure"}
    assert [rid for rid, w in where.items() if not w] == ["judge.corroborate"]
