"""The credit-assignment testbed's bugs: injected once, found again only where they are."""

from __future__ import annotations

from evaluators.tasks.bugs import Bug, find, inject, selected
from evaluators.tasks.family import generate

TASKS = generate(40, seed=3)


def test_each_reference_gets_one_bug_that_find_sees_in_it_and_never_in_the_clean_one():
    kinds = set()
    for t in TASKS:
        ref = t["meta"]["reference"]
        got = inject(ref, t["id"], 0)
        assert got is not None, t["id"]
        bugged, bug = got
        span = find(bugged, bug)
        assert span is not None and find(ref, bug) is None
        # One place changed: the texts agree before the bug and after it.
        assert bugged[:span[0]] == ref[:span[0]]
        tail = len(bugged) - span[0] - len(bug.new)
        assert bugged[len(bugged) - tail:] == ref[len(ref) - tail:]
        assert Bug.from_json(bug.to_json()) == bug
        kinds.add(bug.kind)
        assert inject(ref, t["id"], 0) == got  # the same task and seed, the same bug
    assert len(kinds) >= 3


def test_a_bug_is_found_in_an_answer_that_differs_elsewhere_but_not_in_a_fixed_one():
    t = TASKS[0]
    bugged, bug = inject(t["meta"]["reference"], t["id"], 0)
    moved = "Sure! Here it is, with a longer lead-in.\n\n" + bugged.split("\n\n", 1)[1]
    span = find(moved, bug)
    assert span is not None and moved[span[0]:span[1]] == (bug.new or moved[span[0]])
    assert find(t["meta"]["reference"], bug) is None


def test_the_selected_share_follows_the_fraction():
    ids = [f"t{i}" for i in range(2000)]
    share = sum(selected(i, 0.3, 0) for i in ids) / len(ids)
    assert 0.26 < share < 0.34
    assert not any(selected(i, 0.0, 0) for i in ids) and all(selected(i, 1.0, 0) for i in ids)


def test_the_oracle_localization_blames_exactly_the_bug_where_the_answer_holds_it():
    from evaluators.localize.api import localize_record
    from tests.localize.test_api import failure

    t = TASKS[1]
    bugged, bug = inject(t["meta"]["reference"], t["id"], 0)
    task = {**t, "meta": {**t["meta"], "sft_bug": bug.to_json()}}
    rid = t["rubrics"][0]["id"]

    def localized(response: str) -> dict:
        start = response.index("```html") + len("```html\n")
        rec = {"task_id": t["id"], "response": response, "reward": 0.5, "gate": None,
               "status": "ok", "rubrics": [{"id": rid, "verdict": "fail", "importance": "core"}],
               "diagnostics": [failure(rid)],
               "extraction": {"start": start, "end": response.rindex("```"), "method": "fenced"}}
        (d,) = localize_record(rec, "oracle", task=task)["diagnostics"]
        return d

    d = localized(bugged)
    assert d["s_dir"] == [list(find(bugged, bug))] and d["s_ctx"] == []
    assert [e["rule"] for e in d["evidence"]] == ["oracle.injected_bug"]
    clean = localized(t["meta"]["reference"])  # the policy wrote it right: nothing to blame
    assert clean["s_dir"] == [] and clean["evidence"] == []
