"""A sandboxed headless Chromium that serves one app per page slot.

Generated apps are untrusted code. The app's own document is answered over CDP (request
interception of documents only): the app's URL gets the app, every other navigation (the
page leaving, a frame loading elsewhere) a 204 that cancels it. Subresources go to the
network stack, where exactly the CDN host names reach the offline mirror on a loopback
port (``app_server.AppServer``, which also serves the app document) and everything else
reaches nothing: a proxy that does not exist (IP literals included) and a host resolver
that resolves nothing. Requests that fail are
recorded. The mirror is not served through interception because interception turns the
HTTP cache off and moves every library through the driver as base64 (a page using Plotly
cost 585 ms of CPU that way, 150 ms from the cache).

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
one reused slot. (The context's HTTP cache, which keeps the CDN libraries,
outlives a reset: an app can tell only by how fast its libraries arrive.)

Each renderer starts under a memory cap (`processes.renderer_memory_args`), so a page that
allocates past it fails alone. A browser that stops answering is killed (`processes`), and a
page that was open on it is void (`EvaluatorFault`). Chromium reports how a page's renderer ended (`Target.targetCrashed`):
one killed by a signal from outside is the evaluator's failure (`check_not_killed`, and the
response is scored again), any other crash the app's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import shutil
import tempfile
import time
from typing import AsyncIterator, Awaitable, Callable

from playwright.async_api import Browser, BrowserContext, CDPSession, Page, async_playwright

from evaluators.sandbox.app_server import APP_ORIGIN, APP_URL, AppServer, is_cdn_url
from evaluators.config import BrowserConfig
from evaluators.sandbox.holds import Holds
from evaluators.sandbox.ending import (end_retired, on_crash, quietly, retrieve, stuck,
                                       unstop)
from evaluators.sandbox.processes import (CpuMeter, IdleBurn, answers, browser_mark, browser_pid,
                                          keep_priority_executable, kill, read_tree,
                                          renderer_memory_args,
                                          stall_mark, starved_since,
                                          watch_browser)
from evaluators.sandbox.loading import enable_cpu_reading
from evaluators.sandbox.quiet import QUIET_JS
from evaluators.sandbox.seeded import seeded_random_js
from evaluators.sandbox.writers import WRITERS_JS

__all__ = ["APP_ORIGIN", "APP_URL", "BrowserWorker", "EvaluatorFault", "PageWatch", "parse_stack"]
# Only documents are intercepted (the app's own, and navigations that would leave it), and
# any request for the app's URL (a page may fetch its own document).
_DOCUMENTS = {"patterns": [{"urlPattern": "*", "resourceType": "Document",
                            "requestStage": "Request"},
                           {"urlPattern": APP_URL + "*", "requestStage": "Request"}]}
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
      crash_status: how Chromium says it ended (`Target.targetCrashed`):
        "killed" when a signal from outside ended it (SIGKILL, the kernel's OOM
        killer): not the app's doing; "crashed", "oom" and others otherwise.
      hung: the page stopped answering, did not load or ran out of time: its
        slot is closed, not reset.
      loading: the page is being navigated to the app and has not fired `load`.
      left: the URL of a navigation of the page itself that the sandbox blocked
        while it was loading: the document's load was aborted and never ends.
      step, interaction: the running step and last interaction step.
      shared: another page of the same browser was open at some moment while
        this one was (it shared the CPU).
      inflight: the page's requests that have neither finished nor failed (for
        `quiet.page_quiet`).
      busy: its main thread spent the busy limit of CPU without loading or answering
        (`sandbox.loading`): it hung by itself, however many pages shared the CPU.
      thread_time: reads its main thread's CPU seconds so far (None: cannot say).
      browser_pid: the main process of the browser the page is on (None: not found).
      opened: a `processes.stall_mark` taken as the page opened (`starved`).
    """

    errors: list = dataclasses.field(default_factory=list)
    console_errors: list = dataclasses.field(default_factory=list)
    requests: list = dataclasses.field(default_factory=list)
    dialogs: list = dataclasses.field(default_factory=list)
    popups: list = dataclasses.field(default_factory=list)
    crashed: bool = False
    crash_status: str | None = None
    hung: bool = False
    loading: bool = False
    left: str | None = None
    step: int | None = None
    interaction: int | None = None
    shared: bool = False
    inflight: set = dataclasses.field(default_factory=set)
    busy: bool = False
    thread_time: Callable[[], Awaitable[float | None]] | None = None
    browser_pid: int | None = None
    opened: tuple = (None, 0.0)

    def starved(self) -> bool:
        """Whether the CPU was contended while the page was open (`processes.starved_since`)."""
        return starved_since(self.opened)

    def on_error(self, error) -> None:
        self.errors.append({
            "name": getattr(error, "name", None) or "Error",
            "message": getattr(error, "message", str(error)),
            "frames": parse_stack(getattr(error, "stack", None)),
            "step_index": self.step, "interaction_index": self.interaction,
        })


async def check_not_killed(watch: PageWatch, wait_s: float | None = 30.0) -> None:
    """Raises EvaluatorFault when the page's renderer was killed from outside.

    A renderer that crashed by itself (its memory cap, a V8 heap overflow, the watchdog's
    kill) is the app's failure; one killed by a signal from elsewhere is not, and the
    response is scored again. Chromium reports the status on the browser's own session,
    which may arrive well after the page's crash when the CPU is busy: it is waited for up
    to `wait_s` (the bound past which the browser counts as stuck,
    `BrowserConfig.answer_timeout_s`; None: no bound). A status that has not come by then
    is the evaluator's failure too: a crash is the app's only when the browser says so.
    """
    if not watch.crashed:
        return
    end = None if wait_s is None else time.monotonic() + wait_s
    while watch.crash_status is None and (end is None or time.monotonic() < end):
        await asyncio.sleep(0.05)
    if watch.crash_status is None:
        raise EvaluatorFault(f"the browser did not say within {wait_s} s how the page's "
                             "renderer ended")
    if watch.crash_status == "killed":
        raise EvaluatorFault("the page's renderer was killed from outside the browser "
                             "(a signal, not the app)")


@dataclasses.dataclass
class _Slot:
    """A context with one page, serving one app at a time (`html`, `watch`)."""

    context: BrowserContext
    page: Page
    cdp: CDPSession
    target_id: str  # its page's CDP target, which crash reports name
    thread_time: Callable[[], Awaitable[float | None]]  # its page's main-thread CPU seconds
    token: str = ""  # the current app document's key on the AppServer (one per probe)
    html: str = ""
    document_url: str = ""  # where its APP_URL request is sent
    watch: PageWatch = dataclasses.field(default_factory=PageWatch)
    uses: int = 0
    dead: bool = False  # its renderer crashed (perhaps while idle)


@dataclasses.dataclass
class _Generation:
    """One Chromium process, the pages it has open and its idle page slots."""

    browser: Browser
    session: CDPSession | None = None  # browser-level: crash reports of every page
    slots: dict = dataclasses.field(default_factory=dict)  # target id -> _Slot
    inflight: int = 0
    served: int = 0
    stuck: int = 0  # contexts that would not close
    draining: bool = False
    idle: list = dataclasses.field(default_factory=list)
    watch: asyncio.Future | None = None  # `processes.watch_browser` of this browser
    pid: int | None = None  # its main process
    mark: str | None = None  # the switch it was launched with (`processes.browser_mark`)
    unanswering: bool = False  # it stopped answering and was killed (`processes`)
    stops: int = 0  # its processes found stopped from outside, and killed
    burn: IdleBurn = dataclasses.field(default_factory=IdleBurn)
    cooled: int = 0  # times its idle slots were closed because CPU burned unaccounted


class BrowserWorker:
    """One Chromium at a time, many concurrent contexts (bounded), replaced when it degrades.

    A browser is replaced, without disturbing the pages it still serves, when
    it dies, when contexts stop closing (their renderers would otherwise burn
    CPU for good), or after `recycle_after` pages (bounded memory over long
    runs). The old one is closed once its last page is done.

    Args:
      cfg: page conditions and limits.
      mirror: a CdnMirror (served on a loopback port while the worker runs), or
        None to let every CDN request fail.
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
        self._holds = Holds()
        self._open_watches: list[PageWatch] = []
        self._solo = 0  # pages waiting to run, or running, alone
        self._solo_lock = asyncio.Lock()
        self._server: AppServer | None = None
        self._hits: dict[str, object] = {}  # CDN URL -> MirrorHit or None, for fallbacks
        self.restarts = 0
        self.pages_served = 0  # page() calls: one per probe, plus gate E pages of its own
        self._dumps: str | None = None  # where the browser's crash reporter writes

    async def start(self) -> "BrowserWorker":
        self._server = AppServer(self.mirror)
        self._dumps = tempfile.mkdtemp(prefix="rcca-crash-dumps-")
        self._pw = await async_playwright().start()
        device = dict(self._pw.devices[self.cfg.device])
        device.pop("default_browser_type", None)
        self._device = device
        self._gen = await self._new_generation()
        return self

    async def _launch(self, mark: str) -> Browser:
        exe = self.cfg.executable_path
        if self.cfg.keep_priority:
            exe = keep_priority_executable(exe)
        # Minidumps of crashed renderers (one per memory bomb) go to this worker's own
        # folder, removed as it closes, not into the user's home for ever.
        return await self._pw.chromium.launch(
            executable_path=exe, headless=True,
            env={**os.environ, "BREAKPAD_DUMP_LOCATION": self._dumps},
            args=[*self.cfg.args, *self._server.chromium_args(),
                  *renderer_memory_args(self.cfg.renderer_memory_mb), mark])

    async def _new_generation(self) -> _Generation:
        """Launches a browser, listens for its pages' crash reports and watches it answer."""
        mark = browser_mark()
        gen = _Generation(await self._launch(mark), mark=mark)
        gen.pid = await asyncio.to_thread(browser_pid, mark)
        limit_s = self.cfg.answer_timeout_s
        try:
            gen.session = await asyncio.wait_for(gen.browser.new_browser_cdp_session(), limit_s)
            gen.session.on("Target.targetCrashed", lambda ev: on_crash(gen, ev))
            await asyncio.wait_for(
                gen.session.send("Target.setDiscoverTargets", {"discover": True}), limit_s)
        except Exception as e:  # noqa: BLE001 - a browser we cannot watch is not used
            if isinstance(e, asyncio.TimeoutError):  # a silent browser would not close
                kill(gen.pid, "it did not answer as it started", mark=gen.mark)
            await quietly(asyncio.wait_for(gen.browser.close(), 10))
            raise EvaluatorFault(f"could not watch the browser's pages: {e!r}") from e
        if limit_s is not None:
            gen.watch = asyncio.ensure_future(watch_browser(
                gen.session, gen.browser.is_connected, min(5.0, limit_s / 3), limit_s,
                on_stuck=lambda why: stuck(gen, why), on_tick=lambda: self._tick(gen)))
        return gen

    def _tick(self, gen: _Generation) -> None:
        """At each watch of the browser: stopped processes, then CPU no open page uses."""
        if gen.pid is None or gen.unanswering:
            return
        procs = read_tree(gen.pid)  # one walk of /proc for both checks
        unstop(gen, procs)
        if gen.unanswering or gen.draining:
            return
        cpu = {p: r.cpu for p, r in procs.items()}
        renderers = {p for p, r in procs.items() if r.renderer}
        if not gen.burn.tick(cpu, renderers, gen.inflight, time.monotonic()):
            return
        if gen.idle:  # the likely culprits: close them all, they cost a new context each
            log.warning("closing %d idle page slots: CPU burns that no open page uses",
                        len(gen.idle))
            gen.cooled += 1
            for slot in gen.idle:
                gen.slots.pop(slot.target_id, None)
                asyncio.ensure_future(self._close_context(slot.context, gen))
            gen.idle.clear()
        elif gen is self._gen:  # no slot to blame: a new browser for the next pages
            self._gen = None
            self._retire(gen, "CPU burns that no open page uses")

    async def _answered(self, gen: _Generation) -> bool:
        """Whether the browser still answers as a page of it ends (killed if it does not).

        A page of a browser that stopped answering cannot answer either, and its load,
        steps and watchdog then time out: those verdicts say nothing of the app.
        """
        limit_ms = self.cfg.browser_answer_timeout_ms
        if limit_ms is None or gen.session is None:
            return True
        # Asked even of a browser that is gone: the watch may have killed it meanwhile.
        if not gen.unanswering and not await answers(gen.session, limit_ms / 1000):
            stuck(gen, "it did not answer as a page ended")
        return not gen.unanswering

    async def _admit(self) -> int:
        """Waits until the CPUs have room for another page (see BrowserConfig.admit_cpu_busy)."""
        while self._solo or (self._holds.live() >= self.cfg.min_pages
                             and self._cpu.busy() > self.cfg.admit_cpu_busy):
            self._holds.waiting()
            await asyncio.sleep(0.1)
        return self._holds.add()

    async def _admit_alone(self) -> int:
        """Waits until no other page of this browser is open; none opens until this one ends."""
        while self._holds.live():
            self._holds.waiting()
            await asyncio.sleep(0.05)
        return self._holds.add(alone=True)

    def _opened(self, watch: PageWatch) -> None:
        self._open_watches.append(watch)
        if len(self._open_watches) > 1:
            for w in self._open_watches:
                w.shared = True

    def _closed(self, watch: PageWatch) -> None:
        # By identity: PageWatch is a dataclass, and two pages' watches can be equal.
        self._open_watches = [w for w in self._open_watches if w is not watch]

    async def _acquire(self) -> _Generation:
        async with self._lock:
            gen = self._gen
            if gen is None or gen.draining or not gen.browser.is_connected():
                if gen is not None:
                    self._retire(gen, "it died" if not gen.browser.is_connected() else "it degraded")
                self.restarts += 1
                gen = self._gen = await self._new_generation()
            gen.inflight += 1
            gen.served += 1
            if gen.served >= self._recycle_after:
                gen.draining = True
            return gen

    def _retire(self, gen: _Generation, why: str) -> None:
        log.warning("replacing the browser: %s", why)
        gen.draining = True
        if gen.inflight == 0:
            asyncio.ensure_future(end_retired(gen))

    def _release(self, gen: _Generation) -> None:
        gen.inflight -= 1
        if gen.draining and gen.inflight == 0 and gen is not self._gen:
            asyncio.ensure_future(end_retired(gen))

    async def close(self) -> None:
        if self._gen is not None and self._gen.watch is not None:
            self._gen.watch.cancel()
        with contextlib.suppress(Exception):
            if self._gen is not None:
                await asyncio.wait_for(self._gen.browser.close(), 10)
        with contextlib.suppress(Exception):
            if self._pw is not None:
                await self._pw.stop()
        if self._server is not None:
            self._server.close()
        if self._dumps is not None:
            shutil.rmtree(self._dumps, ignore_errors=True)

    async def _document(self, slot: "_Slot", event: dict) -> None:
        """Sends a request for APP_URL to the slot's app; answers any other document with 204."""
        url = event["request"]["url"]
        rid = event["requestId"]
        with contextlib.suppress(Exception):  # the page may be gone already
            if url.split("#", 1)[0] == APP_URL:
                await slot.cdp.send("Fetch.continueRequest",
                                    {"requestId": rid, "url": slot.document_url})
                return
            if event.get("resourceType") != "Document":  # APP_URL?query: the server refuses it
                await slot.cdp.send("Fetch.continueRequest", {"requestId": rid})
                return
            # Leaving the app (or loading a frame elsewhere): a 204 cancels the navigation
            # and keeps the current document, where a failure would commit an error page.
            slot.watch.requests.append({"kind": "navigation_blocked", "url": url})
            if slot.watch.loading and event.get("frameId") == slot.target_id:
                slot.watch.left = url  # its own load was aborted: see load_app
            await slot.cdp.send("Fetch.fulfillRequest",
                                {"requestId": rid, "responseCode": 204, "responseHeaders": []})

    def _requested(self, request, watch: PageWatch) -> None:
        """Records a CDN request served from another version than it asked for."""
        url = request.url
        if self.mirror is None or not is_cdn_url(url):
            return
        if url not in self._hits:
            self._hits[url] = self.mirror.resolve(url)
        hit = self._hits[url]
        if hit is not None and hit.fallback:
            watch.requests.append({"kind": "cdn_fallback", "url": url, "package": hit.package,
                                   "requested": hit.requested, "served": hit.version})

    @staticmethod
    def _failed(request, watch: PageWatch) -> None:
        """Records a request the sandbox refused (a cancelled one is not recorded)."""
        error = request.failure or ""
        url = request.url
        if "ERR_ABORTED" in error or url.startswith(("data:", "blob:")) or \
                url.split("?", 1)[0] == APP_ORIGIN + "/favicon.ico":
            return
        watch.requests.append({"kind": "blocked_request", "url": url,
                               "resource_type": request.resource_type, "error": error})

    @contextlib.asynccontextmanager
    async def page(self, html: str, alone: bool = False
                   ) -> AsyncIterator[tuple[Page, PageWatch, BrowserContext]]:
        """A page in a clean context (new or reset) that will load `html` from APP_URL.

        The caller navigates (so it controls the timing). With `alone`, the page
        opens once every other page of this browser has closed, and no other
        opens until it closes (a probe rerun without CPU contention). Raises
        EvaluatorFault when the browser itself fails.
        """
        async with contextlib.AsyncExitStack() as stack:
            # A page alone takes no page slot of the semaphore: pages holding one may be
            # waiting for it to end (`_admit`), and it is the only page open anyway.
            if alone:
                await stack.enter_async_context(self._solo_lock)
                self._solo += 1
                stack.callback(self._solo_done)
                hold = await self._admit_alone()
            else:
                await stack.enter_async_context(self._sem)
                hold = await self._admit()
            stack.callback(self._holds.remove, hold)
            gen = await self._acquire()
            stack.callback(self._release, gen)
            stops = gen.stops
            self.pages_served += 1
            slot = None
            try:
                slot = self._idle_slot(gen) or await self._new_slot(gen)
                slot.html, slot.watch = html, PageWatch(thread_time=slot.thread_time,
                                                        browser_pid=gen.pid,
                                                        opened=stall_mark())
                slot.token, slot.document_url = self._server.serve(html)
                slot.uses += 1
                self._opened(slot.watch)
                yield slot.page, slot.watch, slot.context
            finally:
                if slot is not None:
                    self._closed(slot.watch)
                    # Shielded: a cancel of the caller (repeated, by `aio.cancel_and_wait`)
                    # must not cut the slot's reset or close short: the context would leak.
                    end = asyncio.ensure_future(self._end_page(slot, gen))
                    try:
                        answered = await asyncio.shield(end)
                    except asyncio.CancelledError:
                        end.add_done_callback(retrieve)
                        raise
                    if not answered:
                        raise EvaluatorFault("the browser stopped answering while this page "
                                             "was open: its verdicts are void")
                    if gen.stops > stops:
                        raise EvaluatorFault("a process of the browser was stopped from "
                                             "outside while this page was open: its verdicts "
                                             "are void")

    async def _end_page(self, slot: _Slot, gen: _Generation) -> bool:
        """Puts a page's slot back (reset, or closed); whether the browser still answered."""
        unstop(gen)
        answered = await self._answered(gen)
        await self._put_back(slot, gen)
        return answered

    def _idle_slot(self, gen: _Generation) -> _Slot | None:
        """An idle slot whose renderer is alive (one may have been killed while it waited)."""
        while gen.idle:
            slot = gen.idle.pop()
            if not slot.dead:
                return slot
            gen.slots.pop(slot.target_id, None)
            asyncio.ensure_future(self._close_context(slot.context, gen))
        return None

    def _solo_done(self) -> None:
        self._solo -= 1

    async def _new_slot(self, gen: _Generation) -> _Slot:
        """A new context with one page, ready for an app. Each half is bounded by
        `browser_answer_timeout_ms`: a call the browser never answers (a renderer stopped or
        killed as it started) would otherwise hold this page's place, and the rerun alone
        waiting for it, for ever."""
        limit_s = self.cfg.answer_timeout_s
        try:
            # The only TLS peer a page can reach is the mirror, with its self-signed certificate.
            context = await asyncio.wait_for(gen.browser.new_context(
                **self._device, service_workers="block", accept_downloads=False,
                ignore_https_errors=True), limit_s)
        except Exception as e:  # noqa: BLE001 - any failure here is ours
            gen.draining = True
            raise EvaluatorFault(f"could not open a browser context: {e!r}") from e
        try:
            slot = await asyncio.wait_for(self._slot_in(context, gen), limit_s)
        except Exception as e:  # noqa: BLE001
            for key in [k for k, v in gen.slots.items() if v.context is context]:
                del gen.slots[key]
            await self._close_context(context, gen)
            raise EvaluatorFault(f"could not open a page: {e!r}") from e
        self._listen(slot)
        return slot

    async def _slot_in(self, context: BrowserContext, gen: _Generation) -> _Slot:
        """Opens the page of a new slot in ``context`` and starts watching its documents."""
        # Before any document of the context: the quiet tracker must see every timer.
        await context.add_init_script(script=QUIET_JS)
        if self.cfg.random_seed is not None:
            await context.add_init_script(script=seeded_random_js(self.cfg.random_seed))
        if self.cfg.trace_writers:
            await context.add_init_script(script=WRITERS_JS)
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        info = await cdp.send("Target.getTargetInfo")
        slot = _Slot(context, page, cdp, info["targetInfo"]["targetId"],
                     await enable_cpu_reading(cdp))
        gen.slots[slot.target_id] = slot
        slot.cdp.on("Fetch.requestPaused",
                    lambda ev: asyncio.ensure_future(self._document(slot, ev)))
        await slot.cdp.send("Fetch.enable", _DOCUMENTS)
        return slot

    def _listen(self, slot: _Slot) -> None:
        """Routes the slot's page events to whichever app's watch the slot holds."""
        page = slot.page
        page.on("popup", lambda p: self._popup(p, slot.watch))
        page.on("pageerror", lambda e: slot.watch.on_error(e))
        page.on("crash", lambda _: setattr(slot.watch, "crashed", True))
        page.on("dialog", lambda d: self._dialog(d, slot.watch))
        page.on("request", lambda r: self._requested(r, slot.watch))
        page.on("requestfailed", lambda r: self._failed(r, slot.watch))
        # A request of the previous app that ends under the next app's watch is not there.
        page.on("request", lambda r: slot.watch.inflight.add(r))
        page.on("requestfinished", lambda r: slot.watch.inflight.discard(r))
        page.on("requestfailed", lambda r: slot.watch.inflight.discard(r))

    async def _put_back(self, slot: _Slot, gen: _Generation) -> None:
        """Resets the slot for the next app, or closes its context when in any doubt."""
        w = slot.watch
        self._server.forget(slot.token)  # the app is readable only while its probe runs
        keep = (slot.uses < self.cfg.page_reuse and not gen.draining and not w.crashed
                and not w.hung and not slot.dead and gen is self._gen)
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
                gen.slots.pop(slot.target_id, None)
                # Closing the context ends its renderer process, a hung one too (within
                # about 40 ms: its main thread need not answer), so a loop stops here.
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
        asyncio.ensure_future(quietly(page.close()))

    def _dialog(self, dialog, watch: PageWatch) -> None:
        watch.dialogs.append({"type": dialog.type, "message": dialog.message[:500],
                              "step_index": watch.step})
        # Leaving is always allowed: an app may not keep its page from being reset.
        accept = self.cfg.dialog_action == "accept" or dialog.type == "beforeunload"
        action = dialog.accept() if accept else dialog.dismiss()
        asyncio.ensure_future(quietly(action))

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


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0
