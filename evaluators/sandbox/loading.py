"""Loading an app's page, and telling a page busy with its own script from a starved one.

A time limit on the wall clock cannot tell an app that never loads (a `while (true) {}`
at load) from one whose renderer only waited for the CPU beside other pages; the second
kind is decided again alone (`checks.score`), which doubles the time a hung app costs.
The renderer can tell: Chromium's `Performance.getMetrics` reports the CPU time of the
page's main thread (`ThreadTime`), and DevTools answers it even while a script loops
(it interrupts the script to do so). A page whose main thread spent `busy_limit_ms` of
CPU without loading, or without answering a trivial script, hung by itself: contention
slows such a page but cannot make it spend CPU, so no rerun can change that verdict.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Awaitable, Callable

from playwright.async_api import CDPSession, Page

from evaluators.sandbox.app_server import APP_URL

# How often a waiting page's CPU is read (one DevTools round trip, a few ms).
_READ_EVERY_S = 0.5
# A reading that takes longer than this is missing (the renderer is gone or stuck).
_READ_TIMEOUT_S = 1.0


class LeftWhileLoading(Exception):
    """The page navigated away while it loaded; the navigation was blocked, the load aborted."""


class BusyPage(Exception):
    """The page's main thread spent the busy limit of CPU without loading or answering.

    Attributes:
      cpu_s: the CPU seconds its main thread spent in the wait.
    """

    def __init__(self, cpu_s: float):
        super().__init__(f"its script kept the main thread busy for {cpu_s:.1f} s of CPU "
                         "time: an infinite loop?")
        self.cpu_s = cpu_s


async def enable_cpu_reading(cdp: CDPSession) -> Callable[[], Awaitable[float | None]]:
    """Turns on the page's performance metrics and returns a reader of its main thread's
    CPU seconds so far (None when the page cannot say)."""
    await cdp.send("Performance.enable")

    async def read() -> float | None:
        try:
            got = await asyncio.wait_for(cdp.send("Performance.getMetrics"), _READ_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a closed or crashed page: no reading, no verdict
            return None
        return next((m["value"] for m in got.get("metrics", ()) if m["name"] == "ThreadTime"),
                    None)

    return read


class BusyClock:
    """CPU time a page's main thread spends from `start()` on, against a limit.

    Args:
      read: the page's reader (`enable_cpu_reading`), or None (never busy).
      limit_ms: the CPU limit; None for none.
    """

    def __init__(self, read: Callable[[], Awaitable[float | None]] | None,
                 limit_ms: float | None):
        self.read = read if limit_ms is not None else None
        self.limit_s = (limit_ms or 0) / 1000
        self.base: float | None = None

    async def start(self) -> None:
        if self.read is not None:
            self.base = await self.read()

    async def check(self) -> None:
        """Raises BusyPage once the main thread has spent the limit since `start`."""
        if self.read is None or self.base is None:
            return
        now = await self.read()
        if now is None:
            return
        if now < self.base:
            # A navigation moved the page to a new renderer process, whose count began at 0.
            self.base = 0.0
        if now - self.base >= self.limit_s:
            raise BusyPage(now - self.base)


def _over(t0: float, timeout_ms: float, waits: Callable[[], float] | None) -> str | None:
    """Why a wait that began at `t0` (loop time) has run out, or None while it has not: its
    time is `timeout_ms`, plus what `waits` says the page lost waiting for a CPU, up to one
    more `timeout_ms`."""
    elapsed_ms = (asyncio.get_running_loop().time() - t0) * 1000
    if elapsed_ms <= timeout_ms:
        return None
    lost_ms = 0.0 if waits is None else min(timeout_ms, waits() * 1000)
    if elapsed_ms <= timeout_ms + lost_ms:
        return None
    more = f" and {lost_ms:.0f} ms more its browser waited for a CPU" if lost_ms else ""
    return f"Timeout {timeout_ms:.0f}ms exceeded{more}"


async def load_app(page: Page, watch: Any, timeout_ms: float,
                   busy_limit_ms: float | None = None,
                   waits: Callable[[], float] | None = None) -> None:
    """Navigates the page to APP_URL and waits for its `load` event.

    A document that starts a navigation of its own while it loads (a form submitted, a
    `location` set, from an inline script) has its loading aborted: even with that
    navigation cancelled, `load` never fires. Waiting for it would only spend the load
    timeout, so `LeftWhileLoading` is raised as soon as the sandbox blocks such a
    navigation (a browser would have left the app).

    Args:
      watch: the page's `PageWatch` (its `thread_time` reader, if any, meters the CPU).
      busy_limit_ms: CPU time the main thread may spend before `load` (None: no limit).
      waits: seconds the browser's processes have waited for a CPU since the load began
        (on a page alone: `processes.cpu_wait_clock`); the load may take that much longer,
        up to one more `timeout_ms`.

    Raises:
      LeftWhileLoading: the page left while loading (its URL is the message).
      BusyPage: the main thread spent `busy_limit_ms` of CPU and `load` had not fired
        (the watch is marked hung and busy).
      TimeoutError: the load ran past `timeout_ms` and the time given back (`waits`).
      playwright Error: the load failed or timed out.
    """
    clock = BusyClock(watch.thread_time, busy_limit_ms)
    await clock.start()
    watch.loading, watch.left = True, None
    t0 = asyncio.get_running_loop().time()
    nav = asyncio.ensure_future(page.goto(APP_URL, wait_until="load",
                                          timeout=timeout_ms * (1 if waits is None else 2)))
    every = round(_READ_EVERY_S / 0.1)
    try:
        for tick in itertools.count(1):
            done, _ = await asyncio.wait({nav}, timeout=0.1)
            if done:
                nav.result()
                return
            if watch.left is not None:
                raise LeftWhileLoading(watch.left)
            late = _over(t0, timeout_ms, waits) if waits is not None else None
            if late is not None:
                raise TimeoutError(late)
            if tick % every == 0:
                await _checked(clock, watch)
    finally:
        watch.loading = False
        if not nav.done():
            nav.cancel()
        # Retrieved whichever way we leave (it may have failed just as we raised or were
        # cancelled): an unretrieved failure would only be logged, never raised.
        await asyncio.gather(nav, return_exceptions=True)


async def answers(page: Page, watch: Any, timeout_ms: float,
                  busy_limit_ms: float | None = None,
                  waits: Callable[[], float] | None = None) -> None:
    """Returns once the page runs a trivial script.

    Args:
      waits: as for `load_app`: the time the page may take grows by its CPU waits.

    Raises:
      asyncio.TimeoutError: no answer within `timeout_ms` and the time given back (the
        watch is marked hung).
      BusyPage: the main thread spent `busy_limit_ms` of CPU without answering (marked
        hung and busy).
      playwright Error: the page closed or crashed.
    """
    clock = BusyClock(watch.thread_time, busy_limit_ms)
    await clock.start()
    ask = asyncio.ensure_future(page.evaluate("1"))
    t0 = asyncio.get_running_loop().time()
    try:
        while True:
            left = t0 + timeout_ms / 1000 - asyncio.get_running_loop().time()
            if left <= 0 and _over(t0, timeout_ms, waits) is not None:
                watch.hung = True
                raise asyncio.TimeoutError
            done, _ = await asyncio.wait({ask}, timeout=min(_READ_EVERY_S, max(left, 0.1)))
            if done:
                ask.result()
                return
            await _checked(clock, watch)
    finally:
        if not ask.done():
            ask.cancel()
        await asyncio.gather(ask, return_exceptions=True)


async def _checked(clock: BusyClock, watch: Any) -> None:
    try:
        await clock.check()
    except BusyPage:
        watch.hung = watch.busy = True
        raise
