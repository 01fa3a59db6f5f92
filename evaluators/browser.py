"""A sandboxed headless Chromium that serves one app per page slot.

Generated apps are untrusted code. Every request goes through one route
handler: the app itself and CDN files from the offline mirror are fulfilled,
everything else is aborted and recorded. Chromium also gets a dead proxy and a
host resolver that resolves nothing, so a request that escapes interception (a
WebSocket, a worker's fetch) still reaches nothing.

A page slot is a browser context with one page, kept for up to
`BrowserConfig.page_reuse` probes. Between probes the slot is reset to the
state of a new context: the page leaves for about:blank (the app's document,
timers and workers end), the app origin's storage of every kind is cleared
(cookies, local and session storage, IndexedDB, caches), the tab's history
and window name are reset and the mouse goes back to (0, 0). Any doubt (a
crash, a page that does not answer, a reset step that fails) closes the
context instead. Reuse matters because a new context costs a new renderer
process and the CDN libraries compiled again: loading 24 recorded answers one
after another took about 2.4 CPU-s per page with a new context each, 0.9 in
one reused slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import time
from typing import AsyncIterator

from playwright.async_api import (Browser, BrowserContext, CDPSession, Page, Route,
                                  async_playwright)

from evaluators.config import BrowserConfig

APP_ORIGIN = "http://app.rcca.local"
APP_URL = APP_ORIGIN + "/index.html"
_NETWORK_ISOLATION = (
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
_FRAME = re.compile(r"^\s*at (?:(?P<fn>.*?) \()?(?P<url>[^()\s]+?):(?P<line>\d+):(?P<col>\d+)\)?\s*$")
log = logging.getLogger(__name__)


class EvaluatorFault(RuntimeError):
    """The evaluator's own machinery failed (never the response's fault)."""


def parse_stack(stack: str | None) -> list[dict]:
    """Parses V8 stack lines into frames {function, url, line, column} (1-based)."""
    frames = []
    for text in (stack or "").splitlines()[1:]:
        m = _FRAME.match(text)
        if m:
            frames.append({"function": m.group("fn") or "<anonymous>", "url": m.group("url"),
                           "line": int(m.group("line")), "column": int(m.group("col"))})
    return frames


@dataclasses.dataclass
class PageWatch:
    """What a page did while it was being loaded and probed.

    Attributes:
      errors: uncaught exceptions, each with the step that was running and the
        last interaction step before it (None during load).
      console_errors: console.error messages.
      requests: aborted requests and mirror fallbacks.
      dialogs: alert/confirm/prompt/beforeunload dialogs answered.
      popups: URLs of windows the page tried to open (closed at once).
      crashed: the renderer crashed.
      hung: the page stopped answering, did not load or ran out of time: its
        slot is closed, not reset.
      step, interaction: the running step and last interaction step.
    """

    errors: list = dataclasses.field(default_factory=list)
    console_errors: list = dataclasses.field(default_factory=list)
    requests: list = dataclasses.field(default_factory=list)
    dialogs: list = dataclasses.field(default_factory=list)
    popups: list = dataclasses.field(default_factory=list)
    crashed: bool = False
    hung: bool = False
    step: int | None = None
    interaction: int | None = None

    def on_error(self, error) -> None:
        self.errors.append({
            "name": getattr(error, "name", None) or "Error",
            "message": getattr(error, "message", str(error)),
            "frames": parse_stack(getattr(error, "stack", None)),
            "step_index": self.step, "interaction_index": self.interaction,
        })


class CpuMeter:
    """Fraction of the machine's CPU time spent busy, over windows of `window_s`.

    Reads /proc/stat; where it is missing (not Linux) the CPUs always look idle.
    """

    def __init__(self, window_s: float = 0.25):
        self.window_s = window_s
        self._last = self._read()
        self._t = time.monotonic()
        self._busy = 0.0

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v) - idle, sum(v)

    def busy(self) -> float:
        now = time.monotonic()
        if now - self._t >= self.window_s:
            cur = self._read()
            if cur is not None and self._last is not None and cur[1] > self._last[1]:
                self._busy = (cur[0] - self._last[0]) / (cur[1] - self._last[1])
            self._last, self._t = cur, now
        return self._busy


@dataclasses.dataclass
class _Slot:
    """A context with one page, serving one app at a time (`html`, `watch`)."""

    context: BrowserContext
    page: Page
    cdp: CDPSession
    html: str = ""
    watch: PageWatch = dataclasses.field(default_factory=PageWatch)
    uses: int = 0


@dataclasses.dataclass
class _Generation:
    """One Chromium process, the pages it has open and its idle page slots."""

    browser: Browser
    inflight: int = 0
    served: int = 0
    stuck: int = 0  # contexts that would not close
    draining: bool = False
    idle: list = dataclasses.field(default_factory=list)


class BrowserWorker:
    """One Chromium at a time, many concurrent contexts (bounded), replaced when it degrades.

    A browser is replaced, without disturbing the pages it still serves, when
    it dies, when contexts stop closing (their renderers would otherwise burn
    CPU for good), or after `recycle_after` pages (bounded memory over long
    runs). The old one is closed once its last page is done.

    Args:
      cfg: page conditions and limits.
      mirror: a CdnMirror, or None to abort every CDN request.
      pages: contexts open at once; defaults to cfg.pages_per_worker.
    """

    def __init__(self, cfg: BrowserConfig, mirror=None, pages: int | None = None,
                 recycle_after: int = 2000, max_stuck: int = 2):
        self.cfg = cfg
        self.mirror = mirror
        self._sem = asyncio.Semaphore(pages or cfg.pages_per_worker)
        self._lock = asyncio.Lock()
        self._pw = None
        self._gen: _Generation | None = None
        self._device: dict = {}
        self._recycle_after, self._max_stuck = recycle_after, max_stuck
        self._cpu = CpuMeter()
        self._open = 0
        self.restarts = 0

    async def start(self) -> "BrowserWorker":
        self._pw = await async_playwright().start()
        device = dict(self._pw.devices[self.cfg.device])
        device.pop("default_browser_type", None)
        self._device = device
        self._gen = _Generation(await self._launch())
        return self

    async def _launch(self) -> Browser:
        return await self._pw.chromium.launch(
            executable_path=self.cfg.executable_path, headless=True,
            args=[*self.cfg.args, *_NETWORK_ISOLATION])

    async def _admit(self) -> None:
        """Waits until the CPUs have room for another page (see BrowserConfig.admit_cpu_busy)."""
        while self._open >= self.cfg.min_pages and self._cpu.busy() > self.cfg.admit_cpu_busy:
            await asyncio.sleep(0.1)
        self._open += 1

    async def _acquire(self) -> _Generation:
        async with self._lock:
            gen = self._gen
            if gen is None or gen.draining or not gen.browser.is_connected():
                if gen is not None:
                    self._retire(gen, "it died" if not gen.browser.is_connected() else "it degraded")
                self.restarts += 1
                gen = self._gen = _Generation(await self._launch())
            gen.inflight += 1
            gen.served += 1
            if gen.served >= self._recycle_after:
                gen.draining = True
            return gen

    def _retire(self, gen: _Generation, why: str) -> None:
        log.warning("replacing the browser: %s", why)
        gen.draining = True
        if gen.inflight == 0:
            asyncio.ensure_future(_quietly(asyncio.wait_for(gen.browser.close(), 30)))

    def _release(self, gen: _Generation) -> None:
        gen.inflight -= 1
        if gen.draining and gen.inflight == 0 and gen is not self._gen:
            asyncio.ensure_future(_quietly(asyncio.wait_for(gen.browser.close(), 30)))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._gen is not None:
                await asyncio.wait_for(self._gen.browser.close(), 10)
        with contextlib.suppress(Exception):
            if self._pw is not None:
                await self._pw.stop()

    async def _route(self, route: Route, html: str, watch: PageWatch) -> None:
        request = route.request
        url = request.url
        base = url.split("#", 1)[0]
        if base == APP_URL:
            await route.fulfill(status=200, content_type="text/html; charset=utf-8", body=html)
            return
        if request.is_navigation_request():
            # Navigating the app's page away (or a frame or window elsewhere)
            # would leave the app. A 204 answer cancels a navigation and keeps
            # the current document, where an aborted one would commit an
            # error page in its place.
            watch.requests.append({"kind": _navigation_kind(request), "url": url})
            await route.fulfill(status=204, body="")
            return
        if base == APP_ORIGIN + "/favicon.ico":
            await route.fulfill(status=404, body="")
            return
        hit = self.mirror.resolve(url) if self.mirror is not None else None
        if hit is None:
            watch.requests.append({"kind": "blocked_request", "url": url,
                                   "resource_type": request.resource_type})
            await route.abort("blockedbyclient")
            return
        if hit.fallback:
            watch.requests.append({"kind": "cdn_fallback", "url": url, "package": hit.package,
                                   "requested": hit.requested, "served": hit.version})
        await route.fulfill(status=200, body=self.mirror.read(hit),
                            headers={"content-type": hit.content_type,
                                     "access-control-allow-origin": "*"})

    @contextlib.asynccontextmanager
    async def page(self, html: str) -> AsyncIterator[tuple[Page, PageWatch, BrowserContext]]:
        """A page in a clean context (new or reset) that will load `html` from APP_URL.

        The caller navigates (so it controls the timing). Raises
        EvaluatorFault when the browser itself fails.
        """
        async with self._sem:
            await self._admit()
            gen = await self._acquire()
            slot = None
            try:
                slot = gen.idle.pop() if gen.idle else await self._new_slot(gen)
                slot.html, slot.watch = html, PageWatch()
                slot.uses += 1
                yield slot.page, slot.watch, slot.context
            finally:
                if slot is not None:
                    await self._put_back(slot, gen)
                self._open -= 1
                self._release(gen)

    async def _new_slot(self, gen: _Generation) -> _Slot:
        try:
            context = await gen.browser.new_context(**self._device, service_workers="block",
                                                    accept_downloads=False)
        except Exception as e:  # noqa: BLE001 - any failure here is ours
            gen.draining = True
            raise EvaluatorFault(f"could not open a browser context: {e}") from e
        try:
            page = await context.new_page()
            slot = _Slot(context, page, await context.new_cdp_session(page))
            await context.route("**/*", lambda r: self._route(r, slot.html, slot.watch))
        except Exception as e:  # noqa: BLE001
            await self._close_context(context, gen)
            raise EvaluatorFault(f"could not open a page: {e}") from e
        page.on("popup", lambda p: self._popup(p, slot.watch))
        page.on("pageerror", lambda e: slot.watch.on_error(e))
        page.on("crash", lambda _: setattr(slot.watch, "crashed", True))
        page.on("console", lambda m: slot.watch.console_errors.append(m.text)
                if m.type == "error" and len(slot.watch.console_errors) < 50 else None)
        page.on("dialog", lambda d: self._dialog(d, slot.watch))
        return slot

    async def _put_back(self, slot: _Slot, gen: _Generation) -> None:
        """Resets the slot for the next app, or closes its context when in any doubt."""
        w = slot.watch
        keep = (slot.uses < self.cfg.page_reuse and not gen.draining and not w.crashed
                and not w.hung and gen is self._gen)
        reset = False
        try:
            if keep:
                await asyncio.wait_for(self._reset(slot), self.cfg.reset_timeout_ms / 1000)
                reset = not w.crashed
        except Exception as e:  # noqa: BLE001 - a slot that will not reset is closed
            log.info("closing a page slot that did not reset: %s", (str(e) or type(e).__name__)[:200])
        finally:
            if reset:
                gen.idle.append(slot)
            else:
                await self._close_context(slot.context, gen)

    async def _reset(self, slot: _Slot) -> None:
        """Brings a used slot back to what a new context looks like to an app."""
        page, cdp = slot.page, slot.cdp
        await page.evaluate("1")  # a hung page (a loop still running) fails here, in time
        await page.goto("about:blank")
        await cdp.send("Storage.clearDataForOrigin", {"origin": APP_ORIGIN, "storageTypes": "all"})
        await cdp.send("Page.resetNavigationHistory")
        await page.evaluate("window.name = ''")  # the one value a tab carries across documents
        await page.mouse.move(0, 0)
        await page.mouse.up()
        for other in page.context.pages:
            if other is not page:
                await other.close()

    def _popup(self, page: Page, watch: PageWatch) -> None:
        watch.popups.append(page.url)
        asyncio.ensure_future(_quietly(page.close()))

    def _dialog(self, dialog, watch: PageWatch) -> None:
        watch.dialogs.append({"type": dialog.type, "message": dialog.message[:500],
                              "step_index": watch.step})
        # Leaving is always allowed: an app may not keep its page from being reset.
        accept = self.cfg.dialog_action == "accept" or dialog.type == "beforeunload"
        action = dialog.accept() if accept else dialog.dismiss()
        asyncio.ensure_future(_quietly(action))

    async def _close_context(self, context: BrowserContext, gen: _Generation) -> None:
        try:
            await asyncio.wait_for(context.close(), 10)
        except Exception:  # noqa: BLE001
            # Other probes share this browser, so it is not killed here; after a
            # few such contexts it is replaced and closed once its pages are done.
            gen.stuck += 1
            log.warning("a browser context did not close within 10 s (%d in this browser)", gen.stuck)
            if gen.stuck >= self._max_stuck:
                async with self._lock:
                    if gen is self._gen:
                        self._gen = None
                        self._retire(gen, f"{gen.stuck} contexts would not close")


def _navigation_kind(request) -> str:
    """`popup_blocked` for a new window's first navigation, else `navigation_blocked`."""
    try:
        request.frame  # noqa: B018 - Playwright raises for a window still being created
    except Exception:  # noqa: BLE001
        return "popup_blocked"
    return "navigation_blocked"


async def _quietly(awaitable) -> None:
    with contextlib.suppress(Exception):
        await awaitable


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0
