"""Steps decided early on a quiet page, in real Chromium: the same verdicts, sooner.

Each app below either can still change by itself (a timer, a frame, a message, an
observer, an animation will create the element or fix the text later) or cannot. The
first kind must keep the verdict Playwright's runner gives after waiting; the second must
fail well before the timeout. Every case runs with and without `decide_when_quiet`.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from evaluators.config import EvalConfig
from evaluators.fleet.pool import score_rows_async
from evaluators.tasks import parse_task

pytestmark = pytest.mark.browser

CLICK_LATE = {"steps": [{"do": "click", "locator": "#late"},
                        {"expect": "text", "locator": "#out", "value": "clicked"}],
              "timeout_ms": 5000}
TEXT_LATE = {"steps": [{"expect": "text", "locator": "#out", "value": "ready"}], "timeout_ms": 5000}
RETRY_LATE = {"steps": [{"retry": [{"save": "t", "from": "#out", "read": "text"},
                                   {"assert": "equal", "left": {"var": "t"}, "right": "ready"}],
                         "timeout_ms": 5000}], "timeout_ms": 5000}
TASK = parse_task({"id": "tests/quiet", "prompt": "an app", "rubrics": [
    {"id": "click-late", "text": "x", "kind": "dynamic", "importance": "behavior", "probe": CLICK_LATE},
    {"id": "text-late", "text": "x", "kind": "initial", "importance": "behavior", "probe": TEXT_LATE},
    {"id": "retry-late", "text": "x", "kind": "initial", "importance": "behavior", "probe": RETRY_LATE},
]})

BODY = "<p id='out'>wait</p>"


def app(script: str, body: str = BODY, style: str = "") -> str:
    """A response whose script runs after the body (`make()` creates the button, `ready()` the text)."""
    helpers = ("function make(){const b=document.createElement('button');b.id='late';"
               "b.onclick=()=>{document.getElementById('out').textContent='clicked'};"
               "document.body.appendChild(b);b.textContent='go'}"
               "function ready(){document.getElementById('out').textContent='ready'}")
    return (f"```html\n<!DOCTYPE html><html><head><style>{style}</style></head><body>{body}"
            f"<script>{helpers}\n{script}</script></body></html>\n```")


# Apps that change later by themselves: every rubric passes.
LATE = {
    "timeout": app("setTimeout(()=>{make();ready()}, 1800);"),
    "string timeout": app("setTimeout('make();ready()', 1800);"),
    "interval": app("let n=0;const h=setInterval(()=>{if(++n==12){make();ready();clearInterval(h)}},150);"),
    "animation frames": app("const t0=performance.now();(function f(t){if(t-t0>1800){make();ready()}"
                            "else requestAnimationFrame(f)})(t0);"),
    "css animation end": app("document.getElementById('out').addEventListener('animationend',()=>{make();ready()});",
                             style="#out{animation:fade 1.8s}@keyframes fade{from{opacity:0}to{opacity:1}}"),
    "promise chain on a timer": app("new Promise(r=>setTimeout(r,900)).then(()=>new Promise(r=>"
                                    "setTimeout(r,900))).then(()=>{make();ready()});"),
    "message to self": app("window.addEventListener('message',()=>setTimeout(()=>{make();ready()},1500));"
                           "window.postMessage('go','*');"),
    "resize observer": app("new ResizeObserver(()=>setTimeout(()=>{make();ready()},1500))"
                           ".observe(document.getElementById('out'));"),
    "enabled late": app("make(); const b=document.getElementById('late'); b.disabled=true;"
                        "setTimeout(()=>{b.disabled=false; ready()}, 1800);"),
    "message channel": app("const c=new MessageChannel();c.port1.onmessage=()=>{make();ready()};"
                           "setTimeout(()=>{},0);setTimeout(()=>c.port2.postMessage(1),1200);"),
}
# Apps that can never pass: every rubric fails, decided early when asked.
STUCK = {
    "threw on load": app("undefinedFunction();"),
    "static wrong text": app("document.getElementById('out').textContent='nope';"),
    "timer already fired": app("setTimeout(()=>{document.getElementById('out').textContent='nope'},100);"),
    "hidden button": app("make(); document.getElementById('late').style.display='none';"),
    "overrides the tracker": app("try{window.__rccaQuiet=()=>({pending:0,forever:false,busy:'',activity:0})}"
                                 "catch(e){}"),
}
CFG = EvalConfig()
CFG = dataclasses.replace(CFG, browser=dataclasses.replace(
    CFG.browser, probe_time_limit_ms=9000, pages_per_worker=4))


def score(apps: dict[str, str], quiet: bool) -> dict[str, dict]:
    cfg = dataclasses.replace(CFG, browser=dataclasses.replace(CFG.browser, decide_when_quiet=quiet),
                              run_rubrics_after_gate_failure=True)
    rows = [{"task_id": TASK.id, "model": name, "response": html} for name, html in apps.items()]
    return {r["model"]: r for r in asyncio.run(score_rows_async(rows, {TASK.id: TASK}, cfg))}


@pytest.fixture(scope="module")
def quiet_records():
    return score({**LATE, **STUCK}, quiet=True)


@pytest.mark.parametrize("name", sorted(LATE))
def test_pages_that_change_later_are_waited_for(quiet_records, name):
    rec = quiet_records[name]
    assert {v["id"]: v["verdict"] for v in rec["rubrics"]} == {
        "click-late": "pass", "text-late": "pass", "retry-late": "pass"}, rec["rubrics"]


@pytest.mark.parametrize("name", sorted(STUCK))
def test_quiet_pages_fail_before_the_timeout(quiet_records, name):
    rec = quiet_records[name]
    by_id = {v["id"]: v for v in rec["rubrics"]}
    assert all(v["verdict"] == "fail" for v in by_id.values()), rec["rubrics"]
    # Waiting, the page's load plus 5 s (the expectations' timeout) or 9 s (the probe's
    # limit, which bounds the click) would pass before the verdict.
    limits = {"click-late": 9000, "text-late": 5000, "retry-late": 5000}
    for v in by_id.values():
        assert v["duration_ms"] < limits[v["id"]], (v["id"], v["duration_ms"], v["message"])
    diag = [d for d in rec["diagnostics"] if d.get("rubric_id") == "click-late"]
    if name == "hidden button":  # there, but never clickable: a failed step, not a missing one
        assert diag and diag[0]["reason"] == "step_failed", diag
    else:
        assert by_id["click-late"]["severity"] == "severe"
        assert diag and diag[0]["reason"] == "missing_element", diag


def test_without_the_option_the_same_verdicts_come_at_the_timeouts(quiet_records):
    slow = score({"static wrong text": STUCK["static wrong text"], "timeout": LATE["timeout"]},
                 quiet=False)
    for name, rec in slow.items():
        assert [v["verdict"] for v in rec["rubrics"]] == \
            [v["verdict"] for v in quiet_records[name]["rubrics"]]
    waited = {v["id"]: v["duration_ms"] for v in slow["static wrong text"]["rubrics"]}
    assert waited["text-late"] >= 5000 and waited["click-late"] >= 8000, waited


def test_the_tracker_keeps_native_errors_synchronous():
    # The wrappers must not turn a call the browser refuses into one that fails later.
    from playwright.sync_api import sync_playwright

    from evaluators.config import CHROMIUM
    from evaluators.sandbox.quiet import QUIET_JS
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            context = browser.new_context()
            context.add_init_script(script=QUIET_JS)
            page = context.new_page()
            page.set_content("<p id='x'>x</p>")
            for call in ("requestAnimationFrame(undefined)", "requestIdleCallback(5)",
                         "new ResizeObserver(null)", "new IntersectionObserver({})",
                         "new ResizeObserver(() => {}).observe('not an element')"):
                assert page.evaluate(f"() => {{ try {{ {call}; return 'ran'; }} "
                                     f"catch (e) {{ return e.name; }} }}") == "TypeError", call
            assert page.evaluate("() => window.__rccaQuiet().pending") == 0
            page.evaluate("() => { window.h = setTimeout(() => {}, 60000); }")
            assert page.evaluate("() => window.__rccaQuiet().pending") == 1
            page.evaluate("() => clearTimeout(window.h)")
            assert page.evaluate("() => window.__rccaQuiet().pending") == 0
        finally:
            browser.close()
