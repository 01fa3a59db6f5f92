"""Runs one rubric probe on a freshly loaded page (semantics: task-format.md).

Assertions use Playwright's own web-first `expect`, so their retrying,
white-space normalisation and strictness are exactly those of the Playwright
tests the probes were written as.
"""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout
from playwright.async_api import Locator, Page, expect

from evaluators.sandbox.browser import PageWatch, monotonic_ms
from evaluators.sandbox.loading import BusyPage, LeftWhileLoading, load_app
from evaluators.sandbox.quiet import GAP_S, page_quiet, quiet_rtt
from evaluators.config import BrowserConfig
from evaluators.contract import Reason
from evaluators.checks.shots import click_if_ready, element_png
from evaluators.checks.steps import (INTERACTION_KEYS, ProbeError, describe_locator, js_regex,
                              js_string, step_kind)

# Playwright messages that mean the probe's own selector is malformed.
_SELECTOR_ERRORS = re.compile(
    r"Unexpected token|is not a valid selector|Unknown engine|Malformed selector|"
    r"Unsupported token|Invalid selector|Expected .* selector", re.I)
_RETRY_INTERVALS_MS = (100, 250, 500, 1000)
# With decide_when_quiet, an expectation is tried in slices of this long (Playwright polls
# inside each) and the page's quietness is read between them.
_EXPECT_SLICE_MS = 1000.0
# The last try on a quiet page has at least this long, and this many of the page's current
# round trips: the page cannot change, so only the evaluator's own speed can fail it.
_LAST_TRY_MS = 250.0
_LAST_TRY_RTTS = 10
_LAST_TRIAL_MS = 1000.0
_LAST_TRIAL_RTTS = 20
# Pointer actions whose actionability Playwright can check without acting (`trial`).
_TRIAL_ACTIONS = ("click", "dblclick", "hover", "check", "uncheck")
# Playwright's assertion message reports what it saw last.
_ACTUAL = re.compile(r"Actual value: (.*?)(?: \| |$)")


class StepFailure(Exception):
    """A step did not hold (verdict `fail`)."""

    def __init__(self, message: str, severity: str = "moderate", expected: Any = None,
                 actual: Any = None, reason: Reason = Reason.STEP_FAILED):
        super().__init__(message)
        self.severity, self.expected, self.actual = severity, expected, actual
        self.reason = reason
        self.limit_ms: float | None = None  # set when the probe's time limit ran out
        self.decided = False  # failed on a quiet page: waiting longer could not change it


def _short(message: str) -> str:
    # Playwright appends a multi-line call log; the first lines carry the reason.
    lines = [ln for ln in str(message).splitlines() if ln.strip()]
    keep = []
    for ln in lines:
        if ln.strip().startswith("Call log:"):
            break
        keep.append(ln.strip())
    return " | ".join(keep)[:600]


# How long a step that reached the probe's deadline waits for the time limit to end the
# probe (or move its deadline) before it fails by itself.
_OUTLAST_MS = 10_000


class ProbeRunner:
    """Executes the steps of one probe on one page.

    Args:
      page: a page in a fresh context, not yet navigated.
      watch: the page's event record; its `step` and `interaction` are kept
        current so that errors can be attributed to steps.
      probe: the probe JSON (already checked by steps.check_probe).
      action_timeout_ms: timeout of actions and readings (None: until the
        probe's deadline, Playwright's default).
      deadline_ms: monotonic time at which the whole probe must end.
      decide_when_quiet: end waits early on a quiet page (`BrowserConfig.decide_when_quiet`).
      one_trip: screenshots and ready clicks in one evaluation (`BrowserConfig.one_trip_actions`).
      hang_timeout_ms: how long the page may leave a trivial query unanswered before it is
        hung (`BrowserConfig.hang_timeout_ms`, the watchdog's measure too).
    """

    def __init__(self, page: Page, watch: PageWatch, probe: dict, action_timeout_ms: int | None,
                 deadline_ms: float, decide_when_quiet: bool = False,
                 busy_limit_ms: int | None = None, one_trip: bool = True,
                 hang_timeout_ms: float = BrowserConfig.hang_timeout_ms):
        self.page = page
        self.watch = watch
        self.timeout = float(probe.get("timeout_ms", 5000))
        self.action_timeout = float(action_timeout_ms or 1e12)
        self.deadline = deadline_ms
        self.extended_ms = 0.0  # added to the deadline for time the page waited for a CPU
        self.vars: dict[str, Any] = {}
        self.steps = probe["steps"]
        self.loaded = False  # the page's load event fired
        self.decide_when_quiet = decide_when_quiet
        self.busy_limit_ms = busy_limit_ms
        self._decided = False  # the running step's failure was decided on a quiet page
        self._blocks = 0  # retry blocks running (their waits end with the block's time)
        # The deadline that bounded the running step's last wait (`_left`), or None: a wait
        # that ran out then ran out of the probe's time, even if the deadline moved since.
        self._bound: float | None = None
        self.one_trip = one_trip  # `BrowserConfig.one_trip_actions`
        self._cdp = None  # the page's CDP session, for screenshots (`shots.element_png`)
        self.hang_timeout = float(hang_timeout_ms)

    def extend(self, ms: float) -> None:
        """Moves the probe's deadline `ms` later (time its page lost waiting for a CPU)."""
        self.deadline += ms
        self.extended_ms += ms

    def _left(self, want: float) -> float:
        left = self.deadline - monotonic_ms()
        # The latest wait decides: one bounded by its own (action) timeout that runs out is
        # the step's failure, even if an earlier wait of the step was bounded by the probe's.
        self._bound = self.deadline if left <= want else None
        return max(1.0, min(want, left))

    async def load(self, timeout_ms: float) -> None:
        try:
            await load_app(self.page, self.watch, self._left(timeout_ms), self.busy_limit_ms)
        except BusyPage as e:
            raise StepFailure(f"the page did not load ({e})", "severe",
                              reason=Reason.LOAD_FAILED) from None
        except LeftWhileLoading as e:
            raise StepFailure(f"the page left for {str(e)[:300]} while loading (the sandbox "
                              "blocked that navigation; the app's load was aborted)",
                              "severe", reason=Reason.LOAD_FAILED) from None
        except PlaywrightError as e:
            self.watch.hung = True
            raise StepFailure(f"the page did not load: {_short(e)}", "severe",
                              reason=Reason.LOAD_FAILED) from None
        self.loaded = True

    async def run(self) -> None:
        """Runs every step; raises StepFailure or ProbeError at the first that fails."""
        for i, step in enumerate(self.steps):
            self.watch.step = i
            if step_kind(step) in INTERACTION_KEYS:
                self.watch.interaction = i
            await self.run_step(step)

    # --- locators and values -------------------------------------------------

    def locator(self, spec: Any) -> Locator:
        if isinstance(spec, str):
            return self.page.locator(spec)
        if "css" in spec:
            loc = self.page.locator(spec["css"])
        elif "role" in spec:
            kw = {k: spec[k] for k in ("name", "exact") if k in spec}
            loc = self.page.get_by_role(spec["role"], **kw)
        elif "text" in spec:
            loc = self.page.get_by_text(self.value(spec["text"]), exact=spec.get("exact"))
        else:
            loc = self.page.get_by_label(self.value(spec["label"]), exact=spec.get("exact"))
        if "has_text" in spec:
            loc = loc.filter(has_text=self.value(spec["has_text"]))
        nth = spec.get("nth")
        if nth == "first":
            loc = loc.first
        elif nth == "last":
            loc = loc.last
        elif nth is not None:
            loc = loc.nth(nth)
        return loc

    def value(self, spec: Any) -> Any:
        if isinstance(spec, dict) and "regex" in spec:
            return js_regex(spec)
        if isinstance(spec, dict) and "var" in spec:
            if spec["var"] not in self.vars:
                raise ProbeError(self.watch.step, f"unknown var {spec['var']!r}")
            return self.vars[spec["var"]]
        return spec

    def text_value(self, spec: Any) -> Any:
        v = self.value(spec)
        return v if isinstance(v, re.Pattern) else js_string(v)

    # --- steps ---------------------------------------------------------------

    async def run_step(self, step: dict) -> None:
        kind = step_kind(step)
        self._decided, self._bound = False, None
        try:
            if kind == "wait_ms":
                await self._wait(step["wait_ms"])
            elif kind == "retry":
                await self._retry(step)
            else:
                await getattr(self, "_" + kind)(step)
        except (StepFailure, ProbeError):
            raise
        except (AssertionError, PlaywrightError) as e:
            if _SELECTOR_ERRORS.search(str(e)):
                raise ProbeError(self.watch.step, f"bad selector: {_short(e)}") from None
            if not self._blocks and await self._out_of_time():
                return await self.run_step(step)  # in the time given back
            failure = await self._classify(step, _short(e))
            failure.decided = self._decided
            raise failure from None
        except (TypeError, ValueError, KeyError) as e:
            # A step value check_probe let through but the runner cannot use (a `var` that
            # holds an object where a number is needed): the probe's fault, never the app's.
            raise ProbeError(self.watch.step, f"malformed step: {e}") from None

    async def _out_of_time(self) -> bool:
        """Whether the step that just failed ran out of the probe's time and is to run again
        in time given back (`_outlasted`). Its wait may have been bounded by a deadline that
        has moved since (time given back while it waited): it failed at its own timeout, not
        the app's, so it runs again at once, never failing first."""
        now = monotonic_ms()
        if self._bound is not None and now >= self._bound - 20 and self.deadline > self._bound:
            return True
        return now >= self.deadline - 20 and await self._outlasted()

    async def _outlasted(self) -> bool:
        """At the probe's deadline, a step that ran out of time waits for the probe's time
        limit to end it (a timeout, as it would have been had the limit come first): True
        if the deadline moves instead (`extend`), and the step is to run again. False after
        `_OUTLAST_MS` with neither: nothing outside limits this probe."""
        deadline, waited = self.deadline, 0.0
        while self.deadline == deadline and waited < _OUTLAST_MS:
            await asyncio.sleep(0.05)
            waited += 50
        return self.deadline > deadline

    async def _wait(self, wait_ms: float) -> None:
        """A `wait_ms` step; on a quiet page, where waiting cannot change anything, it ends at once."""
        start = monotonic_ms()
        if (self.decide_when_quiet and self.loaded
                and min(wait_ms, self.deadline - start) > 4 * GAP_S * 1000
                and await page_quiet(self.page, self.watch)):
            return
        while True:
            end = min(start + wait_ms, self.deadline)
            left = end - monotonic_ms()
            if left > 0:
                await asyncio.sleep(left / 1000)
            elif end >= start + wait_ms or self._blocks:
                return  # waited it all, or a retry block's time is up: the block decides
            elif not await self._outlasted():
                # The probe's time is up: its time limit ends it here, unless its deadline
                # moves (time given back for CPU waits, `probe_run._within`) and the wait goes on.
                return

    async def _present(self, loc: Locator, spec: Any, step: dict) -> None:
        """Waits until `loc` (built from `spec`) matches an element, as the step's call would.

        Fails at once when none matches on a quiet page (nothing can create one); otherwise
        returns when one matches or the time is up (the step's call then fails as before).
        """
        if not self.decide_when_quiet:
            return
        attempt = 0
        while monotonic_ms() < self.deadline - 1:
            if await loc.count() > 0:
                return
            if await page_quiet(self.page, self.watch):
                if await loc.count() > 0:
                    return
                failure = self.missing(spec, "none appeared and the page is quiet (nothing "
                                       "pending could create one)", step)
                failure.decided = True
                raise failure
            pause = _RETRY_INTERVALS_MS[min(attempt, len(_RETRY_INTERVALS_MS) - 1)]
            await asyncio.sleep(max(0.0, min(pause, self.deadline - monotonic_ms())) / 1000)
            attempt += 1

    async def _sliced(self, attempt, budget_ms: float, missed: type, last: tuple[float, int],
                      finish: bool) -> None:
        """Runs `attempt(timeout_ms)` in slices until it succeeds, decided on a quiet page.

        A slice that fails with `missed` on a page where nothing is pending makes the next try
        the last: nothing can change any more. That try gets `last` = (at least ms, times the
        page's current round trip), so a loaded CPU cannot fail it. With `finish`, a budget too
        short for slicing is spent on one try; otherwise this returns and the caller goes on.
        """
        end = monotonic_ms() + budget_ms
        while end - monotonic_ms() > 2 * _EXPECT_SLICE_MS:
            try:
                await attempt(_EXPECT_SLICE_MS)
                return
            except missed:
                pass
            rtt = await quiet_rtt(self.page, self.watch)
            if rtt is not None:
                self._decided = True
                await attempt(min(max(last[0], last[1] * rtt), max(1.0, end - monotonic_ms())))
                self._decided = False
                return
        if finish:
            await attempt(max(1.0, end - monotonic_ms()))

    async def _until(self, attempt) -> None:
        """Runs a web-first expectation `attempt(timeout_ms)` until it holds or times out
        (decided early on a quiet page with decide_when_quiet)."""
        if not self.decide_when_quiet:
            await attempt(self._left(self.timeout))
            return
        await self._sliced(attempt, self._left(self.timeout), AssertionError,
                           (_LAST_TRY_MS, _LAST_TRY_RTTS), finish=True)

    async def _actionable(self, loc: Locator, action: str) -> None:
        """Waits, as the action itself would, until the element can take a pointer action.

        Tries the action's actionability checks alone (`trial`: nothing is clicked) in slices,
        decided on a quiet page (a hidden, disabled or covered element stays so on a page that
        cannot change). The action itself then runs as usual.
        """
        await self._sliced(lambda t: getattr(loc, action)(trial=True, timeout=t),
                           self._left(self.action_timeout), PlaywrightTimeout,
                           (_LAST_TRIAL_MS, _LAST_TRIAL_RTTS), finish=False)

    async def _do(self, step: dict) -> None:
        loc = self.locator(step["locator"])
        await self._present(loc, step["locator"], step)
        if self.one_trip and step["do"] == "click":
            if await click_if_ready(loc, lambda: self._left(self.action_timeout)):
                return
        if self.decide_when_quiet and step["do"] in _TRIAL_ACTIONS:
            await self._actionable(loc, step["do"])
        t = self._left(self.action_timeout)
        action = step["do"]
        if action == "fill":
            await loc.fill(js_string(self.value(step["value"])), timeout=t)
        elif action == "press":
            await loc.press(js_string(self.value(step["value"])), timeout=t)
        elif action == "select_option":
            await loc.select_option(js_string(self.value(step["value"])), timeout=t)
        elif action == "drag_to":
            await loc.drag_to(self.locator(step["target"]), timeout=t)
        else:
            await getattr(loc, action)(timeout=t)

    async def _point(self, at: dict, step: dict) -> tuple[float, float]:
        if "box" not in at:
            return float(at["x"]), float(at["y"])
        loc = self.locator(at["box"])
        await self._present(loc, at["box"], step)
        box = await loc.bounding_box(timeout=self._left(self.action_timeout))
        if box is None:
            raise StepFailure(f"{describe_locator(at['box'])} has no bounding box (not visible)")
        x = box["x"] + box["width"] * float(at.get("fx", 0.5)) + float(at.get("dx", 0))
        y = box["y"] + box["height"] * float(at.get("fy", 0.5)) + float(at.get("dy", 0))
        return x, y

    async def _mouse(self, step: dict) -> None:
        mouse = self.page.mouse
        action = step["mouse"]
        if "at" in step:
            x, y = await self._point(step["at"], step)
            if action == "click":
                await mouse.click(x, y)
                return
            await mouse.move(x, y, steps=int(step.get("steps", 1)))
        if action == "down":
            await mouse.down()
        elif action == "up":
            await mouse.up()

    async def _read(self, loc: Locator, read: str) -> Any:
        t = self._left(self.action_timeout)
        if read == "text":
            return await loc.text_content(timeout=t)
        if read == "inner_text":
            return await loc.inner_text(timeout=t)
        if read == "inner_html":
            return await loc.inner_html(timeout=t)
        if read == "value":
            return await loc.input_value(timeout=t)
        if read == "checked":
            return await loc.is_checked(timeout=t)
        if read == "count":
            return await loc.count()
        if read == "box":
            return await loc.bounding_box(timeout=t)
        if read == "canvas":
            return await loc.evaluate("el => el.toDataURL()", timeout=t)
        if read == "screenshot":
            if self.one_trip and self._cdp is None:
                self._cdp = await self.page.context.new_cdp_session(self.page)
            return base64.b64encode(await element_png(loc, t, self._cdp)).decode()
        return await loc.get_attribute(read.split(":", 1)[1], timeout=t)

    async def _save(self, step: dict) -> None:
        if "eval" in step:
            left = self._left(self.timeout) / 1000
            try:
                value = await asyncio.wait_for(self.page.evaluate(step["eval"]), left)
            except asyncio.TimeoutError:
                raise StepFailure("the page did not answer an evaluation (hung?)", "severe",
                                  reason=Reason.HANG) from None
        else:
            loc = self.locator(step["from"])
            if step["read"] != "count":
                await self._present(loc, step["from"], step)
            value = await self._read(loc, step["read"])
        self.vars[step["save"]] = value

    async def _expect(self, step: dict) -> None:
        loc = self.locator(step["locator"])
        kind = step["expect"]
        if kind in ("visible", "hidden", "enabled", "disabled", "empty"):
            name, args = f"to_be_{kind}", ()
        elif kind == "checked":
            # "value": false asks for unchecked; with "not" it flips once more.
            want = bool(step.get("value", True)) != bool(step.get("not"))
            check = getattr(expect(loc), "to_be_checked" if want else "not_to_be_checked")
            await self._until(lambda t: check(timeout=t))
            return
        elif kind == "count":
            name, args = "to_have_count", (int(self.value(step["value"])),)
        elif kind in ("attribute", "css"):
            name, args = f"to_have_{kind}", (step["name"], self.text_value(step["value"]))
        else:
            method = {"text": "to_have_text", "contains_text": "to_contain_text",
                      "value": "to_have_value", "class": "to_have_class"}[kind]
            name, args = method, (self.text_value(step["value"]),)
        # Playwright's Python API spells negation as not_to_*.
        check = getattr(expect(loc), ("not_" if step.get("not") else "") + name)
        await self._until(lambda t: check(*args, timeout=t))

    async def _assert(self, step: dict) -> None:
        op = step["assert"]
        left = self.value(step.get("left"))
        right = self.value(step.get("right")) if "right" in step else None
        held = compare(op, left, right, int(step.get("digits", 2)))
        if step.get("not"):
            held = not held
        if not held:
            neg = "not " if step.get("not") else ""
            raise StepFailure(f"assert {neg}{op} failed", "moderate", expected=_preview(right),
                              actual=_preview(left), reason=Reason.WRONG_VALUE)

    async def _retry(self, step: dict) -> None:
        end = min(self.deadline, monotonic_ms() + float(step.get("timeout_ms", self.timeout)))
        # An outermost block that ends with the probe: running out of its time is the
        # probe's timeout, as for a step (`_out_of_time`), never a failure of its own.
        bounded = not self._blocks and end == self.deadline
        saved = (self.timeout, self.action_timeout, self.deadline)
        attempt, last, moved = 0, False, self.extended_ms
        saved_ext = moved
        self._blocks += 1
        try:
            while True:
                # Inner waits are bounded by the block's remaining time so the
                # block can try again instead of spending it all on one wait.
                end += self.extended_ms - moved  # the probe's deadline moved meanwhile
                moved = self.extended_ms
                self.deadline = end
                try:
                    for inner in step["retry"]:
                        await self.run_step(inner)
                    return
                except StepFailure as failure:
                    failure.decided = last
                    if last:
                        raise
                    if monotonic_ms() >= end - 1:
                        if self.deadline > end or (bounded and await self._outlasted()):
                            continue  # the deadline moved: tries on in the time given back
                        raise
                    # A read-only block on a page that can no longer change: one more try,
                    # made after the page was found quiet, reads what every later one would.
                    last = self.decide_when_quiet and read_only(step["retry"]) and \
                        await page_quiet(self.page, self.watch)
                    if last:
                        continue
                pause = _RETRY_INTERVALS_MS[min(attempt, len(_RETRY_INTERVALS_MS) - 1)]
                await asyncio.sleep(max(0.0, min(pause, end - monotonic_ms())) / 1000)
                attempt += 1
        finally:
            self.timeout, self.action_timeout, self.deadline = saved
            self.deadline += self.extended_ms - saved_ext
            self._blocks -= 1

    # --- failure classification ---------------------------------------------

    @staticmethod
    def step_locator(step: dict) -> Any:
        """The locator spec a step waits for, or None."""
        spec = step.get("locator", step.get("from"))
        if spec is None and isinstance(step.get("at"), dict):
            spec = step["at"].get("box")
        return spec

    def missing(self, spec: Any, message: str, step: dict) -> StepFailure:
        """The failure of a step whose element no element matches."""
        return StepFailure(f"no element matches {describe_locator(spec)}: {message}", "severe",
                           expected=step.get("value"), actual=None,
                           reason=Reason.MISSING_ELEMENT)

    async def _classify(self, step: dict, message: str) -> StepFailure:
        """Turns a Playwright failure into a StepFailure with severity and actual value."""
        spec = self.step_locator(step)
        if spec is None:
            return StepFailure(message, "moderate")
        loc = self.locator(spec)
        # Whether the element is there decides the kind (missing: severe; wrong: moderate).
        # A heavy page on a busy CPU can take seconds to answer: it is hung only when it
        # leaves the query unanswered as long as the watchdog's measure (before, 2 s made a
        # wrong value on such a page a severe hang, or not, by the machine's load). The
        # probe's time limit still ends the wait (`probe_run._within`: a time-out).
        try:
            count = await asyncio.wait_for(loc.count(), self.hang_timeout / 1000)
        except (asyncio.TimeoutError, PlaywrightError):
            return StepFailure(f"{message} (the page stopped answering)", "severe",
                               reason=Reason.HANG)
        if count == 0:
            return self.missing(spec, message, step)
        kind = step.get("expect")
        severity = "minor" if kind in ("class", "css", "attribute") else "moderate"
        actual = None
        if kind:
            m = _ACTUAL.search(message)
            actual = _preview(m.group(1)) if m else await _observe(loc, step)
        return StepFailure(message, severity, expected=_preview(step.get("value")), actual=actual,
                           reason=Reason.WRONG_VALUE if kind else Reason.STEP_FAILED)


def read_only(steps: list) -> bool:
    """Whether steps only read the page (no action, no script evaluation)."""
    for step in steps:
        kind = step_kind(step)
        if kind == "retry":
            if not read_only(step["retry"]):
                return False
        elif kind == "save":
            if "eval" in step:
                return False
        elif kind not in ("expect", "assert", "wait_ms"):
            return False
    return True


async def _observe(loc: Locator, step: dict) -> Any:
    """The element's current state for the expectation that failed (best effort)."""
    kind = step["expect"]
    first = loc.first
    script = {
        "text": "e => e.textContent", "contains_text": "e => e.textContent",
        "value": "e => e.value", "class": "e => e.getAttribute('class')",
        "checked": "e => e.checked", "enabled": "e => !e.disabled", "disabled": "e => !!e.disabled",
        "visible": "e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)",
        "hidden": "e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)",
        "empty": "e => e.textContent",
        "attribute": f"e => e.getAttribute({step.get('name')!r})",
        "css": f"e => getComputedStyle(e).getPropertyValue({step.get('name')!r})",
    }.get(kind)
    try:
        if kind == "count":
            return await asyncio.wait_for(loc.count(), 2.0)
        return _preview(await asyncio.wait_for(first.evaluate(script), 5.0))
    except Exception:  # noqa: BLE001 - an observation is evidence, never a verdict
        return None


def _preview(value: Any) -> Any:
    if isinstance(value, re.Pattern):
        return {"regex": value.pattern}
    if isinstance(value, str):
        value = " ".join(value.split())
        return value if len(value) <= 300 else value[:297] + "..."
    return value


def _number(v: Any) -> float:
    if isinstance(v, bool) or v is None:
        raise StepFailure(f"expected a number, got {v!r}", reason=Reason.WRONG_VALUE)
    try:
        return float(v)
    except (TypeError, ValueError):
        raise StepFailure(f"expected a number, got {_preview(v)!r}",
                          reason=Reason.WRONG_VALUE) from None


def compare(op: str, left: Any, right: Any = None, digits: int = 2) -> bool:
    """Evaluates an `assert` step's comparison (Jest semantics for close)."""
    if op == "equal":
        return left == right
    if op == "not_equal":
        return left != right
    if op in ("close", "not_close"):
        close = abs(_number(left) - _number(right)) < 10 ** (-digits) / 2
        return close if op == "close" else not close
    if op == "greater":
        return _number(left) > _number(right)
    if op == "less":
        return _number(left) < _number(right)
    if op == "contains":
        if isinstance(left, str):
            return js_string(right) in left
        return isinstance(left, (list, tuple)) and right in left
    if op in ("truthy", "falsy"):
        # JavaScript truthiness: empty arrays and objects are truthy.
        truthy = True if isinstance(left, (list, dict)) else bool(left)
        return truthy if op == "truthy" else not truthy
    raise ProbeError(None, f"unknown assertion {op!r}")
