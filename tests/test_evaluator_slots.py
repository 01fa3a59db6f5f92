"""Page slots: a reused context must look to an app exactly like a new one.

Each test drives a BrowserWorker with one page at a time, so consecutive apps
land in the same slot unless the slot was closed; page identity tells which.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os

import pytest

from evaluators.sandbox.browser import APP_URL, BrowserWorker
from evaluators.config import BrowserConfig

pytestmark = pytest.mark.browser

# Leaves every kind of state a page can leave behind in its tab or origin.
WRITER = """<!doctype html><html><body style="margin:0">
<div id="pad" style="width:100vw;height:100vh"></div>
<script>
localStorage.setItem('ls', '1');
sessionStorage.setItem('ss', '1');
document.cookie = 'ck=1';
window.name = 'leaked';
history.pushState({}, '', '#moved');
indexedDB.open('leak-db', 1).onupgradeneeded = e => e.target.result.createObjectStore('s');
</script></body></html>"""

# Reads it back, and whether the pointer is over the page without having moved.
READER = """<!doctype html><html><head><style>#pad:hover { color: red }</style></head>
<body style="margin:0"><div id="pad" style="width:100vw;height:100vh">x</div>
<script>
window.moves = 0;
document.addEventListener('mousemove', () => window.moves++);
</script></body></html>"""

READ = """async () => JSON.stringify({
  ls: localStorage.getItem('ls'), ss: sessionStorage.getItem('ss'), cookie: document.cookie,
  name: window.name, history: history.length, hash: location.hash,
  dbs: (await indexedDB.databases()).map(d => d.name),
  hovered: !!document.querySelector('#pad:hover'), moves: window.moves,
})"""


def _cfg(**kw) -> BrowserConfig:
    return dataclasses.replace(BrowserConfig(), **{"pages_per_worker": 1, "min_pages": 1, **kw})


async def _visit(worker: BrowserWorker, html: str, script: str | None = None,
                 mouse_at: tuple[int, int] | None = None):
    async with worker.page(html) as (page, _watch, _ctx):
        await page.goto(APP_URL, wait_until="load")
        if mouse_at is not None:
            await page.mouse.move(*mouse_at)
            await page.mouse.down()  # left pressed: the reset must release it
        await asyncio.sleep(0.2)
        state = json.loads(await page.evaluate(script)) if script else None
        return page, state


async def _reader_after_writer(reuse: int):
    worker = await BrowserWorker(_cfg(page_reuse=reuse)).start()
    try:
        first, _ = await _visit(worker, WRITER, mouse_at=(400, 300))
        second, state = await _visit(worker, READER, READ)
        return first is second, state
    finally:
        await worker.close()


def test_a_reused_slot_looks_like_a_new_context():
    reused, after_reset = asyncio.run(_reader_after_writer(reuse=10))
    fresh, in_new_context = asyncio.run(_reader_after_writer(reuse=1))
    assert reused and not fresh, "the test must compare a reused slot with a new context"
    assert in_new_context == {"ls": None, "ss": None, "cookie": "", "name": "", "history": 2,
                              "hash": "", "dbs": [], "hovered": False, "moves": 0}
    assert after_reset == in_new_context


def _pages(cfg: BrowserConfig, apps: list[str]) -> list:
    async def run():
        worker = await BrowserWorker(cfg).start()
        try:
            return [(await _visit(worker, html))[0] for html in apps]
        finally:
            await worker.close()
    return asyncio.run(run())


def test_slots_serve_page_reuse_probes_then_close():
    p = _pages(_cfg(page_reuse=2), [READER] * 5)
    assert p[0] is p[1] and p[2] is p[3] and p[4] is not p[3] and p[2] is not p[1]


def test_a_page_still_looping_is_closed_not_reset():
    looping = READER.replace("window.moves = 0;", "setTimeout(() => { while (true) {} }, 50);")
    p = _pages(_cfg(page_reuse=10, reset_timeout_ms=1500), [looping, READER, READER])
    assert p[0] is not p[1], "a page that cannot answer must not serve the next app"
    assert p[1] is p[2]


def test_an_app_cannot_refuse_to_be_reset():
    sticky = READER.replace("window.moves = 0;", (
        "window.moves = 0; addEventListener('beforeunload', e => { e.preventDefault(); "
        "e.returnValue = 'stay'; });"))

    async def run():
        worker = await BrowserWorker(_cfg(page_reuse=10)).start()
        try:
            async with worker.page(sticky) as (page, watch, _):
                await page.goto(APP_URL, wait_until="load")
                await page.click("#pad")  # beforeunload needs a user gesture first
            second, state = await _visit(worker, READER, READ)
            return page is second, watch.dialogs, state
        finally:
            await worker.close()

    same, dialogs, state = asyncio.run(run())
    assert same and state["moves"] == 0
    assert [d["type"] for d in dialogs] == ["beforeunload"]


def test_cancelling_a_page_again_and_again_as_it_ends_still_puts_its_slot_back():
    # The caller of a page is cancelled, then cancelled again every 50 ms while the page ends
    # (as `aio.cancel_and_wait` does with a probe whose cancel may be swallowed); ending a
    # page takes longer than that here (its browser check is slowed down). The slot must
    # still be reset and reused, not left open and unaccounted for.
    from evaluators.aio import cancel_and_wait

    async def run():
        worker = await BrowserWorker(_cfg(page_reuse=10)).start()
        answered = worker._answered

        async def slow_answered(gen):
            await asyncio.sleep(0.5)
            return await answered(gen)

        worker._answered = slow_answered
        opened = asyncio.Event()
        pages = []

        async def visit():
            async with worker.page(READER) as (page, _watch, _ctx):
                await page.goto(APP_URL, wait_until="load")
                pages.append(page)
                opened.set()
                await asyncio.sleep(60)

        try:
            task = asyncio.ensure_future(visit())
            await asyncio.wait_for(opened.wait(), 30)
            await cancel_and_wait(task, every_s=0.05, rounds=100)
            gen = worker._gen
            for _ in range(100):  # the shielded end goes on after the caller is gone
                if gen.idle:
                    break
                await asyncio.sleep(0.1)
            idle = [s.page for s in gen.idle]
            worker._answered = answered
            second, _ = await _visit(worker, READER)
            return pages[0], idle, second, len(gen.slots)
        finally:
            await worker.close()

    first, idle, second, slots = asyncio.run(run())
    assert idle == [first], "the cancelled page's slot was not put back"
    assert second is first and slots == 1


def _renderers_started(browser_pid: int) -> int:
    """How many renderer processes the browser has started so far: the highest
    `--renderer-client-id` among its renderers (ids count up from its first process)."""
    from benchmarks.proc_cpu import descendants

    best = 0
    for pid, kind, _ in descendants(browser_pid):
        if kind != "renderer":
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                # Chromium rewrites its process title: arguments may be joined by spaces.
                args = f.read().replace(b"\0", b" ").split()
        except OSError:
            continue
        for a in args:
            if a.startswith(b"--renderer-client-id="):
                best = max(best, int(a.split(b"=", 1)[1]))
    return best


def test_app_after_app_in_one_slot_starts_no_renderer():
    # A slot's renderer serves app after app; Chromium's spare renderer (started for a next
    # navigation that would need a new process, and thrown away again) is off. Before, with
    # two pages open at once, about one renderer was started per app, each a whole Chromium
    # start (measured: 41 to 54 for 30 probes; none with one page at a time).
    async def run():
        worker = await BrowserWorker(_cfg(pages_per_worker=2, min_pages=2)).start()
        try:
            async with worker.page(READER) as (page, watch, _):
                await page.goto(APP_URL, wait_until="load")
                pid = watch.browser_pid
            await asyncio.gather(_visit(worker, READER), _visit(worker, READER))
            await asyncio.sleep(0.5)
            first = _renderers_started(pid)
            for _ in range(6):
                await asyncio.gather(_visit(worker, READER, READ), _visit(worker, READER, READ))
                await asyncio.sleep(0.3)  # a spare would be started in this time
            return first, _renderers_started(pid)
        finally:
            await worker.close()
    first, last = asyncio.run(run())
    assert first > 0 and last - first <= 1, (first, last)


def test_our_disabled_features_keep_playwrights_own():
    # Chromium reads only the last --disable-features; ours must repeat Playwright's list.
    from playwright.async_api import async_playwright

    from benchmarks.proc_cpu import descendants
    from evaluators.config import CHROMIUM, PLAYWRIGHT_DISABLED_FEATURES

    async def playwrights_own() -> set[str]:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM)
            try:
                for pid, kind, _ in descendants(os.getpid()):
                    if kind == "browser":
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            for a in f.read().replace(b"\0", b" ").split():
                                if a.startswith(b"--disable-features="):
                                    return set(a.decode().split("=", 1)[1].split(","))
            finally:
                await browser.close()
        return set()
    own = asyncio.run(playwrights_own())
    ours = [a for a in BrowserConfig().args if a.startswith("--disable-features=")]
    assert own and set(PLAYWRIGHT_DISABLED_FEATURES) == own
    assert len(ours) == 1 and own | {"SpareRendererForSitePerProcess"} == \
        set(ours[0].split("=", 1)[1].split(","))


def test_a_page_whose_renderer_dies_as_it_opens_is_an_evaluator_fault_not_a_hang(monkeypatch):
    # Chromium never answers a CDP call to a renderer's domain (`Performance.enable` as the
    # slot opens) once that renderer is dead. Found in a chaos run: a renderer killed as its
    # page opened held the page's place, and the rerun alone waiting behind it, for ever.
    import signal
    import time

    import evaluators.sandbox.browser as browser_mod
    from benchmarks.proc_cpu import descendants

    real = browser_mod.enable_cpu_reading

    async def killed_first(cdp):
        for pid, kind, _ in descendants(os.getpid()):
            if kind == "renderer":
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        return await real(cdp)

    async def run() -> tuple[float, bool]:
        worker = await BrowserWorker(_cfg(browser_answer_timeout_ms=3000)).start()
        try:
            monkeypatch.setattr(browser_mod, "enable_cpu_reading", killed_first)
            t0 = time.monotonic()
            with pytest.raises(browser_mod.EvaluatorFault, match="could not open a page"):
                async with worker.page(READER):
                    pass
            took = time.monotonic() - t0
            monkeypatch.setattr(browser_mod, "enable_cpu_reading", real)
            async with worker.page(READER) as (page, _watch, _ctx):  # the worker goes on
                await page.goto(APP_URL, wait_until="load")
                return took, await page.evaluate("1") == 1
        finally:
            await worker.close()

    took, goes_on = asyncio.run(asyncio.wait_for(run(), 60))
    assert took < 10 and goes_on


def test_coverage_that_cannot_start_on_a_dead_renderer_is_an_evaluator_fault(monkeypatch):
    # The same silence when coverage starts (`Debugger.enable` on the page's renderer).
    import signal

    import evaluators.checks.score as score_mod
    from benchmarks.proc_cpu import descendants
    from evaluators.checks.extract import extract_app
    from evaluators.config import EvalConfig
    from evaluators.tasks import parse_task

    real = score_mod.Coverage.start

    async def killed_first(self, context, page):
        for pid, kind, _ in descendants(os.getpid()):
            if kind == "renderer":
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        return await real(self, context, page)

    monkeypatch.setattr(score_mod.Coverage, "start", killed_first)
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(
        _cfg(browser_answer_timeout_ms=3000), coverage=True))
    task = parse_task({"id": "t", "prompt": "p", "rubrics": [
        {"id": "r", "text": "x", "kind": "initial", "importance": "core",
         "probe": {"steps": [{"expect": "visible", "locator": "#pad"}]}}]})

    async def run():
        worker = await BrowserWorker(cfg.browser).start()
        try:
            ext = extract_app(f"```html\n{READER}\n```")
            return await score_mod.run_rubric(worker, task.rubrics[0], ext, cfg,
                                              score_mod.Frames(ext))
        finally:
            await worker.close()

    with pytest.raises(score_mod.EvaluatorFault, match="coverage started"):
        asyncio.run(asyncio.wait_for(run(), 60))
