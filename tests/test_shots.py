"""Element screenshots of probes (`checks.shots`): Playwright's bytes, in fewer round trips.

One page in a real Chromium holds the cases: an element at fractional coordinates, one below
the fold, one larger than the viewport (Playwright's path), a focused text field whose caret
must not show, and a selector that matches nothing; and buttons to click: ready, with a child
under the pointer, below the fold, covered, disabled, hidden.
"""

from __future__ import annotations

import asyncio
import base64
import io
import time

import pytest
from PIL import Image
from playwright.async_api import TimeoutError as PlaywrightTimeout

from benchmarks.screenshots import CountingCdp
from evaluators.checks.shots import _CARET_STYLE, click_if_ready, clip_of, element_png
from evaluators.config import EvalConfig
from evaluators.fleet.pool import make_mirror
from evaluators.sandbox.app_server import APP_URL
from evaluators.sandbox.browser import BrowserWorker

PAGE = """<!DOCTYPE html><html><body style="margin:0">
<div id="form" style="padding:8px"><textarea id="t" style="font:60px monospace;
  caret-color:rgb(255,0,0);color:#000;width:400px;height:120px;border:0;outline:0">ab</textarea></div>
<div><button id="ready">a</button><button id="child"><b id="inner">b</b></button>
<span style="position:relative"><button id="covered">c</button><i style="position:absolute;
  left:0;top:-20px;width:80px;height:60px;background:#fff"></i></span>
<button id="disabled" disabled>d</button><button id="hidden" style="visibility:hidden">e</button>
</div>
<div style="padding:10.5px 0 0 7.25px"><canvas id="frac" width="301" height="151"></canvas></div>
<div style="height:1500px"></div>
<canvas id="low" width="200" height="100"></canvas><button id="below">f</button>
<button id="hang">h</button>
<div id="big" style="width:3000px;height:3000px;background:linear-gradient(#0a0,#00a)"></div>
<script>
window.clicks = [];
for (const b of document.querySelectorAll('button')) b.onclick = () => clicks.push(b.id);
document.getElementById('hang').onclick = () => { for (;;) {} };
for (const id of ['frac', 'low']) {
  const g = document.getElementById(id).getContext('2d');
  g.fillStyle = '#c33'; g.fillRect(0, 0, 300, 150);
  g.fillStyle = '#3c3'; g.beginPath(); g.arc(60.5, 40.25, 30.3, 0, 7); g.fill();
}
</script></body></html>"""


def _red_pixels(png: bytes) -> int:
    img = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for r, g, b in img.tobytes() and zip(*[iter(img.tobytes())] * 3)
               if r > 200 and g < 60 and b < 60)


async def _cases() -> dict:
    cfg = EvalConfig()
    worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
    out: dict = {}
    try:
        async with worker.page(PAGE) as (page, _watch, context):
            await page.goto(APP_URL)
            cdp = CountingCdp(await context.new_cdp_session(page))
            for sel in ("#ready", "#child", "#below", "#covered", "#disabled", "#hidden"):
                out[sel] = await click_if_ready(page.locator(sel), lambda: 5000)
            await page.evaluate("() => scrollTo(0, 0)")
            out["clicked"] = await page.evaluate("() => clicks")
            for sel in ("#frac", "#low", "#big"):
                loc = page.locator(sel)
                before = cdp.captures
                ours = await element_png(loc, 5000, cdp)
                out[sel] = (ours == await loc.screenshot(animations="allow"),
                            cdp.captures - before)
            await page.evaluate("() => scrollTo(0, 0)")  # raw captures clip the viewport
            await page.locator("#t").focus()
            area = page.locator("#form")
            shots, raw = [], []
            for _ in range(8):  # the caret blinks about twice a second
                shots.append(await element_png(area, 5000, cdp))
                box = await area.bounding_box()
                clip = {**box, "scale": 1}
                raw.append((await cdp.cdp.send("Page.captureScreenshot", {"clip": clip}))["data"])
                await asyncio.sleep(0.15)
            out["caret"] = ([_red_pixels(s) for s in shots],
                            [_red_pixels(base64.b64decode(r)) for r in raw])
            out["style left"] = await page.evaluate(
                f"() => !!document.getElementById('{_CARET_STYLE}')")
            try:
                await element_png(page.locator("#nope"), 500, cdp)
                out["missing"] = "no error"
            except PlaywrightTimeout as e:
                out["missing"] = str(e)
            try:
                out["missing click"] = await click_if_ready(page.locator("#nope"), lambda: 500)
            except PlaywrightTimeout as e:
                out["missing click"] = str(e)
            # Last: a handler that never returns holds the page (the probe's watchdog ends
            # it), not the click, which returns once the input is delivered, or in its time.
            t0 = time.monotonic()
            try:
                out["hang"] = await click_if_ready(page.locator("#hang"), lambda: 1500)
            except PlaywrightTimeout:
                out["hang"] = "timeout"
            out["hang s"] = time.monotonic() - t0
    finally:
        await worker.close()
    return out


@pytest.fixture(scope="module")
def cases() -> dict:
    return asyncio.run(_cases())


@pytest.mark.browser
def test_the_bytes_are_playwrights_at_fractional_coordinates_and_below_the_fold(cases):
    assert cases["#frac"] == (True, 1)
    assert cases["#low"] == (True, 1)


@pytest.mark.browser
def test_an_element_larger_than_the_viewport_goes_to_playwright(cases):
    assert cases["#big"] == (True, 0)


@pytest.mark.browser
def test_the_caret_of_a_focused_field_never_shows_and_its_style_goes(cases):
    ours, raw = cases["caret"]
    # The raw captures show that this page does draw a blinking red caret.
    assert any(raw), "no caret was ever drawn: this test could not see one"
    assert not any(ours)
    assert cases["style left"] is False


@pytest.mark.browser
def test_only_plainly_ready_elements_are_clicked_in_one_trip_and_the_click_lands(cases):
    assert {k: cases[k] for k in ("#ready", "#child", "#below", "#covered", "#disabled",
                                  "#hidden")} == {
        "#ready": True, "#child": True, "#below": True,
        "#covered": False, "#disabled": False, "#hidden": False}
    assert cases["clicked"] == ["ready", "child", "below"]
    # A handler that never returns does not hold the click beyond its time.
    assert cases["hang"] in (True, "timeout") and cases["hang s"] < 5, cases["hang s"]


@pytest.mark.browser
def test_a_missing_element_times_out_as_playwright_does(cases):
    # After the whole step's time spent waiting for it, not handed to Playwright with none
    # left (its message then named a 1 ms time-out).
    for key in ("missing", "missing click"):
        assert isinstance(cases[key], str) and "Timeout 500ms exceeded" in cases[key], cases[key]


def test_the_clip_rounds_out_to_whole_pixels_in_document_coordinates():
    rect = {"x": 7.25, "y": 10.5, "width": 301, "height": 151, "vw": 1280, "vh": 720,
            "sx": 0, "sy": 900}
    assert clip_of(rect) == {"x": 7, "y": 910, "width": 302, "height": 152, "scale": 1}
    # Empty, or not wholly inside the viewport: Playwright's path.
    assert clip_of({**rect, "width": 0}) is None
    assert clip_of({**rect, "x": -0.5}) is None
    assert clip_of({**rect, "y": 600}) is None
    # What a page's own code put in place of the measurements: Playwright's path, no error.
    for bad in ({**rect, "x": "a"}, {**rect, "width": float("nan")}, {**rect, "sy": None},
                {**rect, "height": float("inf")}, {"x": 1}):
        assert clip_of(bad) is None
