"""Every number the evaluator uses, in one place, with documented defaults."""

from __future__ import annotations

import dataclasses
import os

from evaluators.judge.config import JudgeConfig

CHROMIUM = "/usr/lib/chromium/chromium"
# The features Playwright (1.65) disables with its own --disable-features. Chromium reads only
# the last --disable-features switch, so ours repeats these (a test checks the list against
# the switch Playwright passes, and fails when an upgrade changes it).
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
    "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin", "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled",
    "PreconnectToSearch", "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion")
CHROMIUM_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    # Renderers of untrusted pages get a bounded heap: a memory bomb crashes its
    # own tab (a runtime failure) instead of the evaluator host. (Memory outside the
    # JS heap, ArrayBuffers above all, is capped per renderer process:
    # BrowserConfig.renderer_memory_mb.)
    "--js-flags=--max-old-space-size=512",
    # WebRTC may use UDP only through a proxy that carries UDP, and ours carries
    # nothing: without this, STUN/TURN datagrams from RTCPeerConnection reach any
    # address (loopback and LAN included), since only TCP is sent to the dead proxy.
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    # Timers and rAF keep running in background tabs: the apps are scored
    # concurrently in many tabs and must behave as if each were in front.
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    # WebGL without multisampling, as on a GPU whose driver ignores the `antialias`
    # hint (the WebGL spec allows it; getContextAttributes() then says so). Under
    # SwiftShader 4x MSAA doubles the cost of every frame of a 3D scene (a three.js
    # scene drew 23 frames/s with it, 46 without, on the same CPU), and the frames
    # rendered while probes wait are most of an evaluator's CPU. Verdicts unchanged on
    # the throughput and faithfulness benchmarks.
    "--webgl-antialiasing-mode=none",
    # No spare renderer. Chromium keeps one started for the next navigation that needs a new
    # process; a slot's navigations never do (its renderer serves app after app), yet the
    # spare was started and thrown away again about every half second while probes ran, each
    # a whole Chromium start (the memory cap's command prefix rules out the zygote): about a
    # quarter of the CPU of scoring small apps.
    "--disable-features=" + ",".join((*PLAYWRIGHT_DISABLED_FEATURES,
                                      "SpareRendererForSitePerProcess")),
)

# p(importance, severity): the penalty a violated rubric subtracts from 1.
# A core requirement badly broken costs as much as several cosmetic faults;
# rendering faults cost little so that they never outweigh working behaviour.
DEFAULT_PENALTIES = {
    ("core", "severe"): 0.50, ("core", "moderate"): 0.30, ("core", "minor"): 0.15,
    ("behavior", "severe"): 0.25, ("behavior", "moderate"): 0.15, ("behavior", "minor"): 0.08,
    ("rendering", "severe"): 0.10, ("rendering", "moderate"): 0.06, ("rendering", "minor"): 0.03,
}
# Ceilings: the most a response may score when a rubric of this importance is
# violated at this severity, whatever else passes.
DEFAULT_CEILINGS = {("core", "severe"): 0.4, ("core", "moderate"): 0.7}


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """The gated reward.

    Attributes:
      format_fail: reward when no app is found (gate F).
      source_fail: reward when the source does not parse (gate S).
      runtime_fail: reward when the page does not run (gate E).
      floor: R_rubric = max(floor, 1 - sum of penalties).
      penalties: p(importance, severity).
      ceilings: score ceilings per (importance, severity).
      css_errors_fail_source: whether a CSS syntax error fails gate S. Off by
        default: browsers drop just the broken rule or declaration and the
        page works (e.g. the `#3d-canvas` selector a task's own spec asks
        for); CSS errors are still reported as diagnostics.
    """

    format_fail: float = 0.0
    source_fail: float = 0.0
    runtime_fail: float = 0.1
    floor: float = 0.2
    penalties: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_PENALTIES))
    ceilings: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_CEILINGS))
    css_errors_fail_source: bool = False


@dataclasses.dataclass(frozen=True)
class BrowserConfig:
    """How pages are loaded and probed.

    Attributes:
      executable_path: Debian's Chromium.
      args: Chromium flags.
      device: Playwright device descriptor whose viewport, user agent and
        scale factor every page gets.
      load_timeout_ms: gate E: the `load` event must fire within this (as
        Playwright's default navigation timeout: a page that is only slow
        under load must not fail).
      settle_ms: gate E: time after `load` during which an uncaught exception
        still counts as thrown during load (DOMContentLoaded/load handlers,
        first animation frames).
      hang_timeout_ms: a page that does not run a trivial script within this
        is hung (an infinite loop). Gate E asks once after settling; while a
        probe runs, a watchdog asks every second and ends the probe (and so
        frees the core the loop burns). Generous, so that a page that is only
        starved of CPU by its neighbours, or busy recomputing a plot after an
        input, is never taken for hung (5 s misjudged real apps under load).
      busy_limit_ms: CPU time a page's main thread may spend before its `load`
        event, or after it without answering gate E's trivial script, before
        the page counts as hung by itself (an infinite loop): gate E fails at
        once and is not decided again alone, since starvation slows a page
        but cannot make it spend CPU (`sandbox.loading`). Unlike the wall
        limits it does not grow with contention. None: wall limits only.
      probe_time_limit_ms: the whole probe, page load included, like a
        Playwright test's timeout; past it the probe fails as timed out.
      action_timeout_ms: how long actions and readings wait for their element
        to be actionable; None (the default) bounds them only by the probe's
        time limit, as Playwright's test runner does (no action timeout). A
        short one turns a page that is merely slow under CPU load into a
        failure, which would make verdicts depend on concurrency.
      dialog_action: "dismiss" (Playwright's default, so probes written for
        Playwright see the same page) or "accept".
      pages_per_worker: the most probes in flight at once in one browser.
      admit_cpu_busy: a new page starts only while the machine's CPUs were
        less busy than this over the last quarter second (or while fewer
        than `min_pages` of this worker's pages are open). Probes that wait
        overlap freely, but a starved renderer turns time limits into false
        failures, so concurrency follows the CPU rather than a fixed count.
      min_pages: pages always admitted, however busy the CPUs are.
      page_reuse: probes one page slot (a context with one page) serves
        before its context is closed. Between probes the slot is reset: the
        page leaves for about:blank, the app origin's storage (cookies, local
        and session storage, IndexedDB, caches), the history and the window
        name are cleared and the mouse returns to (0, 0); a crashed, hung or
        unresettable slot is closed at once. Reuse keeps the renderer process
        and V8's compiled CDN libraries: a page costs about 0.9 CPU-s instead
        of 2.4. 1 gives every probe a new context.
      reset_timeout_ms: time a slot's reset may take before it is closed.
      cdn_root: directory of the npm CDN mirror; None means the default.
      coverage: collect precise JS coverage of failing probes (for
        execution-grounded localization).
      coverage_passing: with `coverage`, passing probes' coverage too (on
        their verdict records), so that localization can contrast what
        failing and passing probes ran (spectrum-based suspiciousness). One
        more CDP read per passing probe.
      trace_writers: record the stack of every DOM write of the page
        (`sandbox.writers`); a failing probe's diagnostic then carries the
        writes of the element it checked (`writers`), for localization.
      renderer_memory_mb: the most private writable memory (RLIMIT_DATA) a
        renderer process may hold, set from its start (renderers are launched
        through `prlimit`, util-linux); None for no cap. Past it allocations
        fail in that renderer alone: an ArrayBuffer throws a RangeError,
        anything else crashes the renderer, the app's failure either way, and
        the pages of other renderers are untouched. A renderer holds about
        0.3 GiB with a blank page and 0.7-0.9 GiB with the heaviest
        InteractScience answers (three.js, Plotly) after 48 loads in one slot;
        the V8 heap itself stops at 0.5 GiB (`--max-old-space-size`).
      keep_priority: start the browser without CAP_SYS_NICE (`setpriv`), so
        that as root it cannot raise its threads (apps' code included) to nice
        -8, above the trainer and the evaluator; it runs at the evaluator's
        priority, which `nice` sets. No effect when not root; where it cannot
        be done (no `setpriv`, no CAP_SETPCAP) a warning, and the browser starts
        as before.
      rerun_contended_timeouts: a probe (or gate E) that ran out of time while
        other pages of its browser were open, or while the evaluator's cgroup
        waited for a CPU a tenth of the time or more, is run once more with no
        other page open, and that verdict stands; alone, the time the browser's
        renderer and GPU processes waited for a CPU is given back to its time
        limits (up to one more limit). A heavy app (a WebGL scene, a large
        plot) whose probes run side by side can starve them all past the time
        limit on a small machine; without the rerun its verdicts would depend
        on how many pages the evaluator runs at once and on what else the
        machine runs. Costs at most two more time limits per such probe.
      one_trip_actions: a screenshot read, and a click on an element that is
        plainly ready (visible, enabled, in view, on top at its centre), take
        one evaluation in the page and one capture or one mouse click
        (`checks.shots`), where Playwright makes about a dozen round trips to
        the renderer, each a frame on a heavy page. Anything else goes to
        Playwright's own calls, whose waits and errors decide as before.
        Screenshots are Playwright's bytes; a click skips Playwright's check
        that the element has stopped moving. False: Playwright's calls only.
      decide_when_quiet: a step waiting for an element, for an element's state
        or for an element to take a pointer action, on a page where nothing is
        pending (no timer, animation frame, request, animation or other wake-up
        source: `sandbox.quiet`) is decided at once instead of at its timeout,
        since such a page cannot change by itself (the last check gets time in
        proportion to the page's round trip, so a loaded CPU cannot fail it); a
        `wait_ms` on such a page is skipped, and a read-only `retry` block stops
        after one more try. False waits as Playwright's runner does.
      browser_answer_timeout_ms: the browser's main process is asked a
        trivial question every few seconds; one that leaves it unanswered this
        long is stuck (stopped, deadlocked) and is killed, so the apps using it
        are scored again on a new browser instead of waiting on it for ever
        (`sandbox.processes`). A page open on it while it was silent is void:
        the response is scored again. Beside 8 pages of InteractScience
        answers on 2 busy cores it answered in 4 ms (median), 0.42 s at most
        (125 questions). None: not watched.
      random_seed: every document's Math.random draws a fixed sequence from
        this seed (`sandbox.seeded`), so an app that uses randomness behaves
        the same in every scoring of it and its verdicts, and so its reward,
        are a function of the response (an app whose button may redraw the
        example already shown passed or failed a probe by luck). Web workers
        keep the browser's own. None: the browser's own everywhere.
    """

    executable_path: str = CHROMIUM
    args: tuple[str, ...] = CHROMIUM_ARGS
    device: str = "Desktop Chrome"
    load_timeout_ms: int = 30_000
    settle_ms: int = 300
    hang_timeout_ms: int = 15_000
    busy_limit_ms: int | None = 10_000
    probe_time_limit_ms: int = 30_000
    action_timeout_ms: int | None = None
    dialog_action: str = "dismiss"
    pages_per_worker: int = 4
    admit_cpu_busy: float = 0.85
    min_pages: int = 2
    page_reuse: int = 50
    reset_timeout_ms: int = 5_000
    cdn_root: str | None = None
    coverage: bool = False
    coverage_passing: bool = False
    trace_writers: bool = False
    renderer_memory_mb: int | None = 1536
    keep_priority: bool = True
    rerun_contended_timeouts: bool = True
    one_trip_actions: bool = True
    decide_when_quiet: bool = True
    browser_answer_timeout_ms: int | None = 30_000
    random_seed: int | None = 0

    @property
    def answer_timeout_s(self) -> float | None:
        """`browser_answer_timeout_ms` in seconds, as `asyncio.wait_for` takes it."""
        ms = self.browser_answer_timeout_ms
        return None if ms is None else ms / 1000

    def __post_init__(self):
        for name in ("page_reuse", "reset_timeout_ms", "pages_per_worker"):
            if getattr(self, name) < 1:
                raise ValueError(f"BrowserConfig.{name} must be at least 1, got "
                                 f"{getattr(self, name)}")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Everything the evaluator reads.

    Attributes:
      reward: the gated reward.
      browser: page conditions and limits.
      run_rubrics_after_gate_failure: still run every probe when gate S or E
        failed, so each rubric gets a verdict (for benchmarks that compare
        verdicts); the reward stays gated either way.
      retries: how many attempts at a response may end in an evaluator fault
        (browser died or stopped, renderer killed from outside) without any new
        decision before it gets status `error`. A fault voids only the pages
        open on that browser at the moment: gate E and the probes that had ended
        are kept (`checks.record.Kept`) and a retry runs the rest, and an attempt
        that kept something is not counted (at most one per rubric, one for
        gate E). Costs nothing where nothing dies.
      source_time_limit_ms: gate S, the whole source check (the HTML parse and
        every inline script and stylesheet), runs in a thread of its own and
        must end within this; past it the response fails gate S (a
        `parse_timeout`, its fault). tree-sitter's HTML parse time grows with
        the square of the nesting depth (2 s at 20,000 levels, about 68 s at
        100,000 on one core) while real apps parse in milliseconds, so the
        limit only ever ends documents no browser would build (Chromium's
        tree stops nesting at 512 levels). Generous for a loaded machine.
      judge: the LLM judge (`evaluators.judge.config.JudgeConfig`); off while
        its `base_url` is empty.
    """

    reward: RewardConfig = dataclasses.field(default_factory=RewardConfig)
    browser: BrowserConfig = dataclasses.field(default_factory=BrowserConfig)
    run_rubrics_after_gate_failure: bool = False
    retries: int = 2
    source_time_limit_ms: int = 10_000
    judge: JudgeConfig = dataclasses.field(default_factory=JudgeConfig)


# A browser with its pages open holds about this much memory per page (the renderers of
# the heaviest InteractScience answers reach 0.7-0.9 GiB; most stay near 0.3).
PAGE_MEMORY_GIB = 0.75
MAX_PAGES_PER_WORKER = 6


def _available_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine_fleet(cpus: int | None = None, memory_gib: float | None = None) -> tuple[int, int]:
    """Browser workers and pages per worker that use this machine: (workers, pages).

    One worker (a browser and the Python process driving it) per CPU the process may run
    on, each with up to `MAX_PAGES_PER_WORKER` pages, fewer when the available memory
    cannot hold `PAGE_MEMORY_GIB` per page; at least one worker with two pages. Most of a
    probe's time is spent waiting (timers, the page's own pace), so pages outnumber CPUs;
    admission control (`BrowserConfig.admit_cpu_busy`) keeps a busy machine from starting
    more pages than its CPUs can run.

    Args:
      cpus: CPUs to plan for (default: those this process may run on).
      memory_gib: memory to plan for (default: MemAvailable, or 4 GiB per CPU where
        /proc/meminfo is missing).
    """
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cpus = max(1, cpus)
    if memory_gib is None:
        memory_gib = _available_gib() or 4.0 * cpus
    pages_total = max(2, int(memory_gib / PAGE_MEMORY_GIB))
    workers = max(1, min(cpus, pages_total // 2))
    pages = max(2, min(MAX_PAGES_PER_WORKER, pages_total // workers))
    return workers, pages
