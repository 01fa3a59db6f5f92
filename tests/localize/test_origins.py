"""What the value-origin rules (``evaluators.localize.spans_origins``) must leave alone, and
how a check right after load counts the start-up code as run."""

from __future__ import annotations

from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize
from tests.localize.diags import page_error, probe_failure, rules_of, span
from tests.localize.rows_origins import (
    AT_START, GUARDED, HANDED_ON, SWITCHED, TWO_CALLS_DEEP,
)


def _frames(app: str, *codes: str) -> list[dict]:
    return [{"in_app": True, "offset": app.index(c)} for c in codes]


def _blamed_by(loc, rule: str) -> list[dict]:
    return [e for e in loc.evidence if rule in rules_of(e)]


def test_a_local_also_set_outside_any_branch_is_not_blamed_on_the_branches():
    app = SWITCHED.replace("  let f;\n", "  let f;\n  f = square;\n")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: f is not a function",
        _frames(app, "document.getElementById('out').textContent = f(2);", "plot();\n</script>")),
        "grounded")
    assert _blamed_by(loc, "errors.skipped_settings") == []


def test_a_local_declared_with_a_value_is_not_said_to_be_unset():
    app = SWITCHED.replace("  let f;\n", "  let f = cube;\n")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: f is not a function",
        _frames(app, "document.getElementById('out').textContent = f(2);", "plot();\n</script>")),
        "grounded")
    assert _blamed_by(loc, "errors.skipped_settings") == []


def test_a_library_handed_no_parameter_blames_no_caller():
    # `Vec.dist(origin, origin)` reads globals only: the caller passed nothing it used.
    app = HANDED_ON.replace("return Vec.dist(a, b);", "return Vec.dist(origin, origin);")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: a.sub is not a function",
        [{"in_app": False, "offset": None}, *_frames(
            app, "return Vec.dist(origin, origin);", "const f = foot(origin, height, origin);",
            "draw();\n</script>")]), "grounded")
    assert _blamed_by(loc, "errors.library_parameters") == []


def test_a_return_after_a_return_is_not_followed():
    # The code after `return;` never runs: its `return points;` gives nothing to follow.
    app = TWO_CALLS_DEEP.replace("function fresh(n) { return; }",
                                 "function fresh(n) { return; const points = []; "
                                 "return points; }")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: Cannot read properties of undefined (reading 'forEach')",
        _frames(app, "list.forEach", "draw(list);", "show();\n</script>")), "grounded")
    dead = span("return points;", app)
    assert not any(dead[0] <= e["span"][0] < dead[1]
                   for e in _blamed_by(loc, "errors.missing_argument"))
    assert any(tuple(e["span"]) == span("return;", app) and e["set"] == "dir"
               for e in _blamed_by(loc, "errors.missing_argument"))


def test_a_guard_that_tests_the_value_read_is_not_blamed():
    app = GUARDED.replace("if (scene)", "if (mesh.geometry)")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: Cannot read properties of null (reading 'geometry')",
        _frames(app, "mesh.geometry.dispose();", "clear();\n</script>")), "grounded")
    assert _blamed_by(loc, "errors.guard_of_other") == []


def test_a_check_right_after_load_counts_the_start_up_code_as_run():
    # The probe's coverage begins after load: empty for a check with no action before it,
    # although `update` ran at load and read the misspelled `.values`.
    diag = probe_failure({"expect": "text", "locator": "#total", "value": "6"}, None,
                         coverage={"functions": [], "skipped": []})
    loc = localize(build_graph(AT_START), diag, "grounded")
    bad = span("const n = document.getElementById('n').values;", AT_START)
    assert any(tuple(e["span"]) == bad and e["set"] == "dir"
               for e in _blamed_by(loc, "smells.misspelled_property"))
    # After an action, the coverage is the probe's path: `update` did not run on it.
    acted = probe_failure({"expect": "text", "locator": "#total", "value": "6"},
                          {"do": "fill", "locator": "#n", "value": "3"},
                          coverage={"functions": [], "skipped": []})
    loc = localize(build_graph(AT_START), acted, "grounded")
    assert _blamed_by(loc, "smells.misspelled_property") == []
