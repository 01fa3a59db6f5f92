"""Agentic judging: the judge drives the app through browser tools before it answers.

The tools are OpenAI function tools (``TOOLS``) executed on a page slot of the worker's
sandboxed browser, with the app loaded as the probes load it and the probes' limits: each
action waits at most ``BrowserConfig.action_timeout_ms`` (or 5 s) for its element, and the
whole session at most ``JudgeConfig.agent_time_s``. The judge may call at most
``JudgeConfig.agent_steps`` tools; past that, or past the time, it is told to answer and
offered no tools, and a judge that still calls tools gets no verdicts (its rubrics become
``error``: a loop that never ends is cut). Every call, its arguments and a short result are
kept in the record (``judge.trajectory``). A tool that fails (no such element, a time-out)
answers with the error, for the judge to read; it is the app's behaviour, not a fault.
"""

from __future__ import annotations

import base64
import json
import time

from evaluators.judge.client import Completion

_SEL = {"selector": {"type": "string", "description": "a CSS selector, or text=... / role=..."}}


def _tool(name: str, doc: str, props: dict, required: tuple[str, ...]) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": doc,
        "parameters": {"type": "object", "properties": props, "required": list(required),
                       "additionalProperties": False}}}


TOOLS = [
    _tool("click", "Click the element.", _SEL, ("selector",)),
    _tool("fill", "Type a value into an input (replacing its value).",
          {**_SEL, "value": {"type": "string"}}, ("selector", "value")),
    _tool("press", "Press a key (Enter, ArrowUp, a, ...) on the element.",
          {**_SEL, "key": {"type": "string"}}, ("selector", "key")),
    _tool("select", "Choose an option of a <select> by value or label.",
          {**_SEL, "value": {"type": "string"}}, ("selector", "value")),
    _tool("hover", "Move the mouse over the element.", _SEL, ("selector",)),
    _tool("read_text", "The visible text of the element.", _SEL, ("selector",)),
    _tool("read_attribute", "An attribute or property (value, checked, class, style...).",
          {**_SEL, "name": {"type": "string"}}, ("selector", "name")),
    _tool("list_interactive", "The page's buttons, inputs, selects and links.", {}, ()),
    _tool("console_log", "Uncaught errors and console errors so far.", {}, ()),
    _tool("screenshot", "A PNG of the page (only for judges that read images).", {}, ()),
]
_LIST_JS = """() => Array.from(document.querySelectorAll(
  'button, input, select, textarea, a[href], [role=button], [onclick]')).slice(0, 60).map(e =>
  ({tag: e.tagName.toLowerCase(), id: e.id || null, type: e.type || null,
    text: (e.innerText || e.value || e.getAttribute('aria-label') || '').slice(0, 60)}))"""
_READ_JS = """(e, name) => { const v = (name in e) ? e[name] : e.getAttribute(name);
  return v === null || v === undefined ? null : String(v).slice(0, 2000); }"""


class PageTools:
    """Runs the judge's tool calls on one loaded page and keeps the trajectory."""

    def __init__(self, page, watch, action_timeout_ms: float, images: bool):
        self.page, self.watch = page, watch
        self.timeout = action_timeout_ms
        self.images = images
        self.trajectory: list[dict] = []

    async def run(self, call: dict) -> tuple[str, str | None]:
        """(text result for the judge, a PNG data URL when the tool took a screenshot)."""
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        try:
            args = json.loads(fn.get("arguments") or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments are not an object")
        except ValueError as e:
            return self._keep(name, {}, f"error: bad arguments ({e})"), None
        try:
            result, image = await self._do(name, args)
        except Exception as e:  # noqa: BLE001 - the app's behaviour, reported to the judge
            result, image = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}", None
        return self._keep(name, args, result), image

    def _keep(self, name: str, args: dict, result: str) -> str:
        self.trajectory.append({"tool": name, "args": args, "result": result[:500]})
        return result

    async def _do(self, name: str, a: dict) -> tuple[str, str | None]:
        page, t = self.page, self.timeout
        loc = page.locator(str(a.get("selector", ""))).first if "selector" in a else None
        if name == "click":
            await loc.click(timeout=t)
        elif name == "fill":
            await loc.fill(str(a["value"]), timeout=t)
        elif name == "press":
            await loc.press(str(a["key"]), timeout=t)
        elif name == "select":
            await loc.select_option(str(a["value"]), timeout=t)
        elif name == "hover":
            await loc.hover(timeout=t)
        elif name == "read_text":
            return json.dumps(await loc.inner_text(timeout=t)), None
        elif name == "read_attribute":
            return json.dumps(await loc.evaluate(_READ_JS, str(a["name"]), timeout=t)), None
        elif name == "list_interactive":
            return json.dumps(await page.evaluate(_LIST_JS)), None
        elif name == "console_log":
            return json.dumps([str(e.get("message"))[:300] for e in self.watch.errors][-20:]), None
        elif name == "screenshot":
            if not self.images:
                return "error: this judge does not read images", None
            png = await page.screenshot(timeout=t)
            return "the screenshot follows", "data:image/png;base64," + base64.b64encode(
                png).decode()
        else:
            return f"error: no tool named {name!r}", None
        return "ok", None


async def converse(client, messages: list[dict], tools: PageTools, steps: int, time_s: float,
                   response_format: dict | None) -> tuple[Completion | None, list[Completion]]:
    """The tool loop: returns the final completion (None when the judge never stopped calling
    tools) and every completion, for usage."""
    done: list[Completion] = []
    deadline = time.monotonic() + time_s
    used = 0
    while True:
        budget_left = used < steps and time.monotonic() < deadline
        reply = await client.complete(messages, response_format=None if budget_left else
                                      response_format, tools=TOOLS if budget_left else None)
        done.append(reply)
        if not reply.tool_calls:
            return reply, done
        if not budget_left:
            return None, done
        messages.append({"role": "assistant", "content": reply.content or None,
                         "tool_calls": list(reply.tool_calls)})
        images = []
        for call in reply.tool_calls:
            used += 1
            text, image = await tools.run(call)
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": text})
            if image:
                images.append(image)
        if images:  # tool messages carry text only: the picture comes as the user's
            messages.append({"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": u}} for u in images]})
        if used >= steps or time.monotonic() >= deadline:
            messages.append({"role": "user", "content": "The browsing budget is spent: give "
                             "your verdicts now, as the JSON object required."})
