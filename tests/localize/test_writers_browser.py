"""End to end: the page records who wrote the element a failed probe checked
(`BrowserConfig.trace_writers`), the record carries it, and localization blames that write."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from evaluators.config import EvalConfig
from evaluators.fleet.pool import score_rows_async
from evaluators.localize.api import localize_record
from evaluators.records import validate_record
from evaluators.tasks import parse_task

pytestmark = pytest.mark.browser

# The checked elements are reached through positions and a helper, never by their ids, so no
# name in the code leads to them: only the trace can. The app also tries to remove the reader.
APP = """```html
<input id="qty" type="number" value="2"><button id="add">Add</button>
<div class="panel"><span id="total">0</span><span id="note">ok</span></div>
<script>
try { delete window.__rccaWrites__; window.__rccaWrites__ = null; } catch (e) {}
const slots = () => document.querySelectorAll('.panel span');
function put(el, v) {
  el.textContent = String(v);
}
function price(q) {
  return q * 3 - 1;
}
function refresh() {
  const q = Number(document.querySelector('input').value);
  put(slots()[0], price(q));
  const n = slots()[1];
  n.classList.toggle('warn', q > 1);
  n.style.display = q > 1 ? 'none' : 'inline';
}
document.querySelector('button').addEventListener('click', refresh);
</script>
```"""


def _task():
    probe = lambda steps: {"timeout_ms": 500, "steps": steps}  # noqa: E731
    click = {"do": "click", "locator": "#add"}
    return parse_task({"id": "tests/writers", "prompt": "x", "rubrics": [
        {"id": "total", "text": "x", "kind": "dynamic", "importance": "core",
         "probe": probe([click, {"expect": "text", "locator": "#total", "value": "6"}])},
        {"id": "note", "text": "x", "kind": "dynamic", "importance": "behavior",
         "probe": probe([click, {"expect": "visible", "locator": "#note"}])},
        {"id": "saved", "text": "x", "kind": "dynamic", "importance": "behavior",
         "probe": probe([click, {"save": "t", "from": "#total", "read": "text"},
                         {"assert": "equal", "left": {"var": "t"}, "right": "6"}])},
        # An evaluated reading names its element only inside its source.
        {"id": "evaluated", "text": "x", "kind": "dynamic", "importance": "behavior",
         "probe": probe([click, {"save": "t", "eval":
                                 "() => document.getElementById('total').textContent"},
                         {"assert": "equal", "left": {"var": "t"}, "right": "6"}])}]})


def _score(trace: bool) -> dict:
    task = _task()
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(
        cfg.browser, coverage=True, trace_writers=trace))
    (rec,) = asyncio.run(score_rows_async([{"task_id": task.id, "response": APP}],
                                          {task.id: task}, cfg))
    return rec


def _at(needle: str) -> tuple[int, int]:
    i = APP.index(needle)
    return i, i + len(needle)


def _holds(spans, span) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


def test_a_failed_check_carries_the_writes_of_its_element_and_is_blamed_on_them():
    rec = _score(trace=True)
    validate_record(rec)
    assert [v["verdict"] for v in rec["rubrics"]] == ["fail"] * 4, rec["rubrics"]
    diags = {d["rubric_id"]: d for d in rec["diagnostics"] if d["kind"] == "probe_failure"}
    write, call = _at("el.textContent = String(v);"), _at("put(slots()[0], price(q));")

    total = diags["total"]["writers"]
    texts = [w for w in total if w["kind"] == "text" and w["where"] == "self"]
    assert texts, total
    offsets = [f["offset"] for f in texts[-1]["frames"] if f["in_app"]]
    assert write[0] <= offsets[0] < write[1] and call[0] <= offsets[1] < call[1], texts[-1]
    # The wrappers' own frames are not the app's: they map to nothing.
    assert all(f["offset"] is None for w in total for f in w["frames"] if not f["in_app"])

    kinds = {w["kind"] for w in diags["note"]["writers"]}
    assert {"class", "style"} <= kinds, diags["note"]["writers"]
    # An assert on a saved reading gets the writes of the element the reading came from.
    assert any(w["kind"] == "text" for w in diags["saved"]["writers"])
    # ... and one on an evaluated reading, those of the element its source looks up.
    assert any(w["kind"] == "text" for w in diags["evaluated"]["writers"])

    out = localize_record(rec, task=_task())
    loc = {d["rubric_id"]: d for d in out["diagnostics"] if d["kind"] == "probe_failure"}
    assert _holds(loc["total"]["s_dir"], write)
    assert any(e["rule"] == "probe.writers" for e in loc["total"]["evidence"])
    style = _at("n.style.display = q > 1 ? 'none' : 'inline';")
    assert _holds(loc["note"]["s_dir"], style)
    assert _holds(loc["evaluated"]["s_dir"], write)


def test_without_tracing_no_writes_are_recorded_and_the_rule_blames_nothing():
    rec = _score(trace=False)
    diags = [d for d in rec["diagnostics"] if d["kind"] == "probe_failure"]
    assert diags and all("writers" not in d for d in diags)
    out = localize_record(rec, task=_task())
    assert not any(e["rule"] == "probe.writers" for d in out["diagnostics"]
                   for e in d.get("evidence") or ())


SAME = """```html
<div id="box" class="a">x</div><p id="out"></p>
<script>
const b = document.getElementById('box');
const s = b.style;
const checks = [
  b.style === s, s instanceof CSSStyleDeclaration,
  (s.setProperty('color', 'red'), getComputedStyle(b).color === 'rgb(255, 0, 0)'),
  (Object.assign(b.style, {width: '40px'}), b.style.width === '40px'),
  (s.cssText = 'height: 7px', b.style.height === '7px' && b.style.width === ''),
  (b.style = 'top: 3px', s.top === '3px'),
  (b.classList.toggle('z'), b.className === 'a z'),
  (b.setAttribute('data-k', '1'), b.dataset.k === '1'),
  (b.textContent = 'y', b.firstChild.data === 'y'),
  Array.from(s).includes('top') && s.length === 1,
  typeof Element.prototype.appendChild === 'function' &&
    document.body.appendChild(document.createElement('i')).tagName === 'I',
];
document.getElementById('out').textContent = checks.map(Number).join('');
// The wrapped schedulers (timers, frames, microtasks, promise reactions) and canvas calls
// behave as the real ones.
const later = [];
const id = setTimeout(() => later.push(false), 10);
later.push(typeof id === 'number');
clearTimeout(id);
setTimeout('window.fromString = 1', 0);
Promise.resolve(2).then((v) => v * 3).then((v) => later.push(v === 6)).catch(() => {})
  .finally(() => later.push(true));
Promise.reject(new Error('x')).catch((e) => later.push(e.message === 'x'));
queueMicrotask(() => later.push(true));
requestAnimationFrame((t) => later.push(typeof t === 'number'));
const ctx = document.createElement('canvas').getContext('2d');
ctx.fillStyle = '#f00';
ctx.fillRect(0, 0, 1, 1);
later.push(ctx.getImageData(0, 0, 1, 1).data[0] === 255);
(async () => { await null; later.push(true); })();
// Read out after the timers and two frames more: a loaded machine may draw the first frame
// later than any fixed delay.
setTimeout(() => requestAnimationFrame(() => requestAnimationFrame(() => {
  later.push(window.fromString === 1);
  document.getElementById('async').textContent = later.map(Number).join('');
})), 150);
</script><p id="async"></p>
```"""


def test_traced_pages_behave_as_untraced_ones():
    """The wrappers change nothing an app can observe in common use: style objects keep their
    identity and type, methods keep working on the real objects, writes take effect."""
    task = parse_task({"id": "tests/same", "prompt": "x", "rubrics": [
        {"id": "same", "text": "x", "kind": "initial", "importance": "core", "probe": {
            "timeout_ms": 500,
            "steps": [{"expect": "text", "locator": "#out", "value": "1" * 11}]}},
        {"id": "async", "text": "x", "kind": "initial", "importance": "core", "probe": {
            "timeout_ms": 3000,
            "steps": [{"expect": "text", "locator": "#async", "value": "1" * 9}]}}]})
    for trace in (False, True):
        cfg = EvalConfig()
        cfg = dataclasses.replace(cfg, browser=dataclasses.replace(cfg.browser,
                                                                   trace_writers=trace))
        (rec,) = asyncio.run(score_rows_async([{"task_id": task.id, "response": SAME}],
                                              {task.id: task}, cfg))
        assert [v["verdict"] for v in rec["rubrics"]] == ["pass", "pass"], (
            trace, rec["rubrics"], rec["diagnostics"])


# A value shown by a promise reaction and a canvas painted in an animation frame: the
# callbacks' own stacks begin at `update` and `repaint`; who scheduled them (`onGo`) is
# only known through the scheduling stacks the page keeps.
LATER = """```html
<button id="go">Go</button><span id="shown">0</span><canvas id="cv" width="4" height="4"></canvas>
<script>
let n = 0;
function show(el, v) {
  el.textContent = String(v);
}
function wait() {
  return new Promise((done) => setTimeout(done, 0));
}
function update() {
  show(document.querySelectorAll('span')[0], n);
}
function paint(c) {
  c.fillStyle = '#00f';
  c.fillRect(0, 0, 4, 4);
}
function repaint() {
  paint(document.querySelector('canvas').getContext('2d'));
}
function onGo() {
  n += 2;
  wait().then(update);
  requestAnimationFrame(repaint);
}
document.querySelector('button').addEventListener('click', onGo);
</script>
```"""


def test_writes_in_callbacks_carry_their_schedulers_and_canvas_draws_are_writes():
    click = {"do": "click", "locator": "#go"}
    task = parse_task({"id": "tests/later", "prompt": "x", "rubrics": [
        {"id": "shown", "text": "x", "kind": "dynamic", "importance": "core", "probe": {
            "timeout_ms": 800, "steps": [click, {"expect": "text", "locator": "#shown",
                                                 "value": "1"}]}},
        {"id": "painted", "text": "x", "kind": "dynamic", "importance": "core", "probe": {
            "timeout_ms": 2000, "steps": [click, {"wait_ms": 300},
                                          {"save": "c", "from": "#cv", "read": "canvas"},
                                          {"assert": "equal", "left": {"var": "c"},
                                           "right": "blank"}]}}]})
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(
        cfg.browser, coverage=True, trace_writers=True))
    (rec,) = asyncio.run(score_rows_async([{"task_id": task.id, "response": LATER}],
                                          {task.id: task}, cfg))
    validate_record(rec)
    diags = {d["rubric_id"]: d for d in rec["diagnostics"] if d["kind"] == "probe_failure"}
    assert set(diags) == {"shown", "painted"}, rec["rubrics"]

    def in_app(w):
        return [f["offset"] for f in w["frames"] if f["in_app"]]

    def where(needle):
        i = LATER.index(needle)
        return [k for k, off in enumerate(offs) if i <= off < i + len(needle)]

    text = [w for w in diags["shown"]["writers"] if w["kind"] == "text"]
    assert text, diags["shown"]["writers"]
    offs = in_app(text[-1])
    # Own stack (the write, then its caller), then the scheduler of the promise reaction.
    assert where("el.textContent = String(v);") == [0], offs
    assert where("show(document.querySelectorAll('span')[0], n);") == [1], offs
    assert where("wait().then(update);") and where("wait().then(update);")[0] > 1, offs

    draws = [w for w in diags["painted"]["writers"] if w["kind"] == "draw"]
    assert draws, diags["painted"]["writers"]
    offs = in_app(draws[-1])
    assert where("c.fillRect(0, 0, 4, 4);") == [0], offs
    assert where("paint(document.querySelector('canvas').getContext('2d'));") == [1], offs
    assert where("requestAnimationFrame(repaint);"), offs

    out = localize_record(rec, task=task)
    loc = {d["rubric_id"]: d for d in out["diagnostics"] if d["kind"] == "probe_failure"}
    i = LATER.index("c.fillRect(0, 0, 4, 4);")
    assert _holds(loc["painted"]["s_dir"], (i, i + len("c.fillRect(0, 0, 4, 4);")))
