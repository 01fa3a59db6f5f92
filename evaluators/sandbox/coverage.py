"""Which of the app's functions and blocks actually ran: precise JS coverage over CDP.

Execution-grounded localization needs the code that ran on a failing path. V8's
precise block coverage with call counts is read once right after the page
loads (reading resets the counters) and again when a probe fails, so the second
reading holds exactly what the probe's interactions ran: the functions called,
and inside them the blocks (branches, loop bodies) that did not run.
"""

from __future__ import annotations

import asyncio

from playwright.async_api import BrowserContext, Page

from evaluators.sandbox.browser import APP_URL
from evaluators.checks.extract import Extraction
from evaluators.checks.textindex import TextIndex


class Coverage:
    """A CDP session that records the app's scripts and their function call counts."""

    def __init__(self):
        self._session = None
        self._scripts: dict[str, tuple[int, int]] = {}  # scriptId -> (line, column), 0-based

    async def start(self, context: BrowserContext, page: Page) -> None:
        """Starts recording; call before the page navigates."""
        s = await context.new_cdp_session(page)
        s.on("Debugger.scriptParsed", self._parsed)
        await s.send("Debugger.enable")
        # A `debugger;` statement in the app must not pause it.
        await s.send("Debugger.setSkipAllPauses", {"skip": True})
        await s.send("Profiler.enable")
        await s.send("Profiler.startPreciseCoverage", {"callCount": True, "detailed": True})
        self._session = s

    def _parsed(self, params: dict) -> None:
        if params.get("url", "").split("#", 1)[0] == APP_URL:
            self._scripts[params["scriptId"]] = (params["startLine"], params["startColumn"])

    async def stop(self) -> None:
        """Ends recording and detaches (the page may serve later probes); never raises."""
        try:
            await asyncio.wait_for(self._session.detach(), 2.0)
        except Exception:  # noqa: BLE001 - a dead page's session is gone anyway
            pass

    async def take(self) -> list[dict]:
        """Function call counts since the last take (raw CDP entries of the app's scripts)."""
        res = await self._session.send("Profiler.takePreciseCoverage")
        return [s for s in res["result"] if s["scriptId"] in self._scripts]

    def functions(self, raw: list[dict], extraction: Extraction,
                  index: TextIndex) -> tuple[list[dict], list[list[int]]]:
        """The functions that ran, and the blocks inside them that did not, in response
        coordinates.

        Returns:
          (functions, skipped): functions [{"name", "start", "end", "count"}] sorted by
          start, a script's top-level code left out (it runs once, at load); skipped
          [[start, end]], the blocks of those functions that did not run, sorted.
        """
        out, skipped = [], []
        for script in raw:
            line, col = self._scripts[script["scriptId"]]
            base = index.from_v8(line + 1, col + 1)
            if base is None:
                continue
            base16 = index.char_to_utf16(base)

            def span(rng: dict) -> list[int]:
                return [extraction.to_response(index.utf16_to_char(base16 + rng[k]))
                        for k in ("startOffset", "endOffset")]

            for fn in script["functions"]:
                rng = fn["ranges"][0]
                if rng["count"] == 0 or not fn["functionName"] and rng["startOffset"] == 0:
                    continue
                start, end = span(rng)
                out.append({"name": fn["functionName"], "start": start, "end": end,
                            "count": rng["count"]})
                skipped += [span(b) for b in fn["ranges"][1:] if b["count"] == 0]
        return sorted(out, key=lambda f: (f["start"], f["end"])), sorted(skipped)
