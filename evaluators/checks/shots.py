"""Screenshots and clicks for probes, in one round trip to a busy page where Playwright takes many.

A probe's ``read: screenshot`` compares pictures of an element before and after an action
(a WebGL scene, a chart). Playwright's ``Locator.screenshot`` waits for the element to be
stable over animation frames, hides the caret in every frame, waits for fonts, measures the
element, captures, and restores the caret: each a round trip to the renderer's main thread,
which on a heavy page (three.js or Plotly drawn by SwiftShader) answers once per long frame.
Probes that read three such pictures ran close to their time limit, and past it whenever the
machine was busier (`benchmarks/screenshots.py` measures both paths).

`element_png` does the same work in one evaluation in the page (wait for fonts, scroll the
element into view if needed, measure it, hide the caret only when an editable element has
the focus) and one ``Page.captureScreenshot`` of that rectangle, rounded out to whole pixels
the way Playwright clips, so the bytes equal Playwright's for the same pixels and the two
paths can be mixed within a probe. Anything outside that simple case (an element in another
frame, one not wholly inside the viewport, one with no size, more than one match, a detached
element) goes to ``Locator.screenshot``, whose waiting and errors then decide, as before.
It does not wait for the element to stop moving: the picture of a moving element differs
from the next one either way.

`ready_point` is the same idea for a click: one evaluation says whether the element is
plainly ready (connected, in this document, visible, enabled, its centre inside the viewport
after scrolling it into view if needed, and the element, or one inside it, on top at that
point) and where its centre is; the probe then clicks there with Playwright's mouse. Playwright
checks the same things over about a dozen round trips (and, besides, that the element has
stopped moving). An element that is not plainly ready goes to Playwright's click, whose waits
and errors decide, as before.
"""

from __future__ import annotations

import asyncio
import base64
import math
import time
from typing import Any, Callable

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator
from playwright.async_api import TimeoutError as PlaywrightTimeout

# The id of the style that hides the caret while a focused editable element is captured (a
# blinking caret would make two pictures of an unchanged form differ).
_CARET_STYLE = "rcca-hide-caret"

_PREPARE = """async (e) => {
  await document.fonts.ready;
  if (e.ownerDocument !== document) return null;
  let r = e.getBoundingClientRect();
  if (r.left < 0 || r.top < 0 || r.right > innerWidth || r.bottom > innerHeight) {
    e.scrollIntoView({block: 'center', inline: 'center'});
    r = e.getBoundingClientRect();
  }
  const a = document.activeElement;
  const editable = !!a && (a.isContentEditable || a.tagName === 'TEXTAREA' ||
      (a.tagName === 'INPUT' && !['range', 'checkbox', 'radio', 'button', 'submit', 'reset',
        'color', 'file', 'image', 'hidden'].includes(a.type)));
  if (editable && !document.getElementById('%(id)s')) {
    const s = document.createElement('style');
    s.id = '%(id)s';
    s.textContent = '* { caret-color: transparent !important; }';
    (document.head || document.documentElement).appendChild(s);
  }
  return {x: r.left, y: r.top, width: r.width, height: r.height, vw: innerWidth,
          vh: innerHeight, sx: scrollX, sy: scrollY, caret: editable};
}""" % {"id": _CARET_STYLE}

_READY = """(e) => {
  if (!e.isConnected || e.ownerDocument !== document) return null;
  const style = getComputedStyle(e);
  if (style.visibility !== 'visible' || style.pointerEvents === 'none') return null;
  if (e.matches(':disabled') || e.closest('[aria-disabled=true]')) return null;
  const inside = (r) => r.width > 0 && r.height > 0 && r.left + r.width / 2 >= 0 &&
      r.top + r.height / 2 >= 0 && r.left + r.width / 2 < innerWidth &&
      r.top + r.height / 2 < innerHeight;
  let r = e.getBoundingClientRect();
  if (!(r.width > 0 && r.height > 0)) return null;
  if (!inside(r)) {
    e.scrollIntoView({block: 'center', inline: 'center'});
    r = e.getBoundingClientRect();
    if (!inside(r)) return null;
  }
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  if (!hit || !(hit === e || e.contains(hit))) return null;
  return [x, y];
}"""

_RESTORE = "() => document.getElementById('%s')?.remove()" % _CARET_STYLE


def clip_of(rect: Any) -> dict[str, float] | None:
    """The capture rectangle (document coordinates, whole CSS pixels) of an element's
    viewport rectangle `rect`, or None when it is empty, not wholly in the viewport, or not
    numbers (the page's own code can replace what the measuring calls return).

    Whole pixels as Playwright clips (the enclosing integer rectangle), so that the two
    paths give the same bytes.
    """
    try:
        x0, y0 = math.floor(rect["x"]), math.floor(rect["y"])
        x1 = math.ceil(rect["x"] + rect["width"])
        y1 = math.ceil(rect["y"] + rect["height"])
        vw, vh, sx, sy = (float(rect[k]) for k in ("vw", "vh", "sx", "sy"))
        empty = not (rect["width"] > 0 and rect["height"] > 0)
    except (TypeError, KeyError, ValueError, OverflowError):
        return None
    if empty or x0 < 0 or y0 < 0 or x1 > vw or y1 > vh:
        return None
    if not (math.isfinite(sx) and math.isfinite(sy)):
        return None
    return {"x": x0 + sx, "y": y0 + sy, "width": x1 - x0, "height": y1 - y0, "scale": 1}


async def element_png(loc: Locator, timeout_ms: float, cdp: Any) -> bytes:
    """A PNG of the element `loc` matches (see the module docstring).

    Args:
      loc: the step's locator (strict: one element).
      timeout_ms: how long the reading may take, both paths together.
      cdp: a CDP session of the locator's page (`BrowserContext.new_cdp_session`); None:
        Playwright's screenshot alone.
    """
    if cdp is None:
        return await loc.screenshot(timeout=timeout_ms, animations="allow")
    end = time.monotonic() + timeout_ms / 1000
    try:
        rect = await loc.evaluate(_PREPARE, timeout=timeout_ms)
    except PlaywrightTimeout:
        raise  # the step's time is spent: Playwright's call would time out too, at once
    except PlaywrightError:
        rect = None  # several, a detached one: Playwright decides
    clip = clip_of(rect) if isinstance(rect, dict) else None
    caret = isinstance(rect, dict) and rect.get("caret") is True
    try:
        if clip is not None:
            shot = await cdp.send("Page.captureScreenshot", {"format": "png", "clip": clip})
            return base64.b64decode(shot["data"])
    finally:
        if caret:
            await _restore(loc)
    left_ms = max(1.0, (end - time.monotonic()) * 1000)
    return await loc.screenshot(timeout=left_ms, animations="allow")


async def _restore(loc: Locator) -> None:
    try:
        await loc.page.evaluate(_RESTORE)
    except PlaywrightError:
        pass  # the page went away: nothing to restore


async def ready_point(loc: Locator, timeout_ms: float) -> tuple[float, float] | None:
    """Where to click the element `loc` matches, in viewport pixels, when it is plainly ready
    (see the module docstring); None otherwise (Playwright's click decides)."""
    try:
        point = await loc.evaluate(_READY, timeout=timeout_ms)
    except PlaywrightTimeout:
        raise  # the step's time is spent waiting for the element: so would Playwright's be
    except PlaywrightError:
        return None  # several, a detached one: Playwright decides
    try:
        x, y = (float(v) for v in point)
    except (TypeError, ValueError):
        return None  # nothing, or what the page's own code made of the measurements
    return (x, y) if math.isfinite(x) and math.isfinite(y) else None


async def click_if_ready(loc: Locator, left_ms: Callable[[], float]) -> bool:
    """Clicks the element `loc` matches at its centre if it is plainly ready (`ready_point`);
    whether it did. `left_ms()` is the time the step has left; the click is bounded by it as
    Playwright's is (a handler may hang), raising Playwright's TimeoutError."""
    point = await ready_point(loc, left_ms())
    if point is None:
        return False
    try:
        await asyncio.wait_for(loc.page.mouse.click(*point), left_ms() / 1000)
    except asyncio.TimeoutError:
        raise PlaywrightTimeout("Timeout exceeded while clicking") from None
    return True
