"""Who wrote what a probe read: the stacks of the page's DOM writes, per element.

With `BrowserConfig.trace_writers`, `WRITERS_JS` runs in every document before the app's own
scripts. It wraps the DOM's writing APIs (text and HTML setters, form values, attributes,
classes, inline style, child insertion and removal) so that each write records an `Error`
(its stack, formatted only when read) on the node it changed, and leaves them otherwise
untouched: each wrapper calls the original and returns its result. A node keeps its first
writes and its latest ones (`FIRST`, `LAST`), so a loop that rewrites an element every frame
costs a bounded list, and the write that set the initial state is not pushed out by it.

When a probe step fails on an element, `read_writers` asks the page for the writes of that
element, of its descendants (text set on a child is the element's text) and the child and
HTML writes of its ancestors (the code that created it, or replaced it); the stacks are parsed
like an exception's (`browser.parse_stack`), and `checks.diagnostics.Frames` maps their frames
to the response. The wrappers' own frames belong to no app URL and map to nothing.

Canvas draws are not DOM writes: a 2D or WebGL context's drawing calls (fills, strokes,
text, images, pixels, clears, WebGL draws) are noted on the context's canvas as `draw`
writes, the first call of each task only (a frame draws hundreds of shapes, and one stack
says which code drew it).

Scheduling: V8's `Error.stack` of a callback begins at the callback (only `await` keeps
its callers), so the code that started a timer, an animation frame, a microtask or a promise
reaction would be lost. Those APIs are wrapped so that each callback carries the stack that
scheduled it, and the stacks of up to `SCHEDULERS` - 1 callbacks before it; a write made in
the callback keeps them, and its frames continue with them, newest first, as the stack of a
synchronous call would (Chromium's DevTools shows asynchronous stacks the same way). Event
listeners are not wrapped: their scheduler is the line that bound them, which the code graph
already knows, and the dispatch came from the probe.

What it cannot see: which of a task's draw calls drew a wrong pixel (only the task's first
is noted), and a write through a framework's virtual DOM shows the framework's frames below
the app's (the app's frames are still on the stack).
"""

from __future__ import annotations

import asyncio
from typing import Any

from playwright.async_api import Locator

# The page's reader, a non-enumerable, non-writable global: an app cannot replace it.
READER = "__rccaWrites__"
# Writes kept per node: the first ones (the state it started with) and the latest ones.
FIRST, LAST = 2, 6
# Scheduling stacks a callback carries: its own scheduler's and those of the callbacks
# that scheduled it, newest first (a chain of timers is cut here, so memory stays bounded).
SCHEDULERS = 2

WRITERS_JS = r"""
(() => {
  const READER = "%(reader)s", FIRST = %(first)d, LAST = %(last)d, SCHEDULERS = %(schedulers)d;
  if (Object.prototype.hasOwnProperty.call(window, READER)) return;
  const W = window;
  const microtask = W.queueMicrotask && W.queueMicrotask.bind(W);  // before it is wrapped
  let scheduled = null;  // the running callback's scheduling Errors, newest first
  const log = new WeakMap();   // node -> {first, last}: lists of [kind, Error, seq]
  const owners = new WeakMap();  // a classList or style object -> its element
  let seq = 0;  // the writes' order, across nodes
  const note = (node, kind) => {
    if (!node || (typeof node !== "object")) return;
    let r = log.get(node);
    if (!r) { r = {first: [], last: []}; log.set(node, r); }
    // Two frames of the stack are this file's (the wrapper, this function).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 14;
    const w = [kind, new Error(), ++seq, scheduled];
    Error.stackTraceLimit = limit;
    if (r.first.length < FIRST) r.first.push(w);
    else { r.last.push(w); if (r.last.length > LAST) r.last.shift(); }
  };
  const setter = (proto, prop, kind, target) => {
    const d = proto && Object.getOwnPropertyDescriptor(proto, prop);
    if (!d || !d.set || !d.configurable) return;
    const orig = d.set;
    Object.defineProperty(proto, prop, {...d, set(v) {
      note(target ? target(this) : this, kind);
      return orig.call(this, v);
    }});
  };
  const method = (proto, name, kind, target) => {
    const orig = proto && proto[name];
    if (typeof orig !== "function") return;
    const wrapped = {[name](...args) {
      note(target ? target(this, args) : this, kind);
      return orig.apply(this, args);
    }}[name];
    Object.defineProperty(proto, name, {value: wrapped, writable: true, configurable: true});
  };
  const getterOwner = (proto, prop) => {
    const d = proto && Object.getOwnPropertyDescriptor(proto, prop);
    if (!d || !d.get || !d.configurable) return;
    const orig = d.get;
    Object.defineProperty(proto, prop, {...d, get() {
      const v = orig.call(this);
      if (v && typeof v === "object") owners.set(v, this);
      return v;
    }});
  };
  const parent = (n) => n && n.parentNode;
  const ownerOf = (x) => owners.get(x);
  setter(W.Node && Node.prototype, "textContent", "text");
  setter(W.Node && Node.prototype, "nodeValue", "text", parent);
  setter(W.CharacterData && CharacterData.prototype, "data", "text", parent);
  for (const p of ["innerHTML", "outerHTML"])
    setter(W.Element && Element.prototype, p, "html", p === "outerHTML" ? parent : null);
  for (const p of ["innerText", "outerText", "hidden", "title", "dir", "lang"])
    setter(W.HTMLElement && HTMLElement.prototype, p, p.endsWith("Text") ? "text" : "attr");
  for (const p of ["id", "className"])
    setter(W.Element && Element.prototype, p, p === "id" ? "attr" : "class");
  for (const [ctor, props] of [
      ["HTMLInputElement", ["value", "checked", "valueAsNumber", "disabled", "min", "max",
                            "step", "type", "placeholder"]],
      ["HTMLTextAreaElement", ["value", "disabled"]],
      ["HTMLSelectElement", ["value", "selectedIndex", "disabled"]],
      ["HTMLOptionElement", ["selected", "value", "text", "label"]],
      ["HTMLButtonElement", ["disabled", "value"]],
      ["HTMLOutputElement", ["value"]], ["HTMLProgressElement", ["value", "max"]],
      ["HTMLMeterElement", ["value"]], ["HTMLImageElement", ["src"]],
      ["HTMLAnchorElement", ["href"]], ["HTMLCanvasElement", ["width", "height"]]])
    for (const p of props) setter(W[ctor] && W[ctor].prototype, p,
                                  p === "value" || p === "checked" || p === "selected" ||
                                  p === "selectedIndex" || p === "valueAsNumber"
                                  ? "value" : "attr");
  for (const m of ["setAttribute", "removeAttribute", "toggleAttribute", "setAttributeNS"])
    method(W.Element && Element.prototype, m, "attr");
  for (const m of ["appendChild", "insertBefore", "removeChild", "replaceChild"])
    method(W.Node && Node.prototype, m, "child");
  for (const m of ["append", "prepend", "replaceChildren", "insertAdjacentElement",
                   "insertAdjacentText"])
    method(W.Element && Element.prototype, m, "child");
  method(W.Element && Element.prototype, "insertAdjacentHTML", "html");
  for (const m of ["remove", "before", "after", "replaceWith"])
    method(W.Element && Element.prototype, m, "child", parent);
  getterOwner(W.Element && Element.prototype, "classList");
  for (const m of ["add", "remove", "toggle", "replace"])
    method(W.DOMTokenList && DOMTokenList.prototype, m, "class", ownerOf);
  // `el.style.color = x` goes through a named-property setter of the declaration, not an
  // accessor that could be wrapped: an element's style is handed out behind a Proxy (one per
  // declaration, so `el.style === el.style` still holds) that notes each assignment. Methods
  // are bound to the real declaration, which native code requires as `this`.
  const proxies = new WeakMap();
  const styled = (proto) => {
    const d = proto && Object.getOwnPropertyDescriptor(proto, "style");
    if (!d || !d.get || !d.configurable) return;
    const orig = d.get;
    const put = d.set;
    Object.defineProperty(proto, "style", {...d, set(v) {
      note(this, "style");
      return put.call(this, v);
    }, get() {
      const decl = orig.call(this);
      if (!decl || typeof decl !== "object") return decl;
      owners.set(decl, this);
      let p = proxies.get(decl);
      if (!p) {
        p = new Proxy(decl, {
          set(t, k, v) { note(owners.get(t), "style"); return Reflect.set(t, k, v); },
          get(t, k) { const v = Reflect.get(t, k); return typeof v === "function" ? v.bind(t) : v; },
        });
        proxies.set(decl, p);
      }
      return p;
    }});
  };
  styled(W.HTMLElement && HTMLElement.prototype);
  styled(W.SVGElement && SVGElement.prototype);
  const css = W.CSSStyleDeclaration && CSSStyleDeclaration.prototype;
  for (const m of ["setProperty", "removeProperty"]) method(css, m, "style", ownerOf);
  // Canvas draws, noted on the canvas once per task (the flag is cleared by a microtask).
  const drawn = new WeakSet();
  const canvasOf = (ctx) => {
    const c = ctx && ctx.canvas;
    if (!c || drawn.has(c) || !microtask) return null;
    drawn.add(c);
    microtask(() => drawn.delete(c));
    return c;
  };
  for (const ctor of ["CanvasRenderingContext2D", "OffscreenCanvasRenderingContext2D"])
    for (const m of ["fillRect", "strokeRect", "clearRect", "fillText", "strokeText", "fill",
                     "stroke", "drawImage", "putImageData", "reset"])
      method(W[ctor] && W[ctor].prototype, m, "draw", canvasOf);
  for (const ctor of ["WebGLRenderingContext", "WebGL2RenderingContext"])
    for (const m of ["drawArrays", "drawElements", "clear", "drawArraysInstanced",
                     "drawElementsInstanced"])
      method(W[ctor] && W[ctor].prototype, m, "draw", canvasOf);
  // Scheduling: each callback carries the stacks that scheduled it (see the module's notes).
  const carry = (fn) => {
    if (typeof fn !== "function") return fn;  // setTimeout("code"): left as it is
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 10;
    const chain = [new Error(), ...(scheduled || []).slice(0, SCHEDULERS - 1)];
    Error.stackTraceLimit = limit;
    return function (...args) {
      const saved = scheduled;
      scheduled = chain;
      try { return fn.apply(this, args); } finally { scheduled = saved; }
    };
  };
  for (const name of ["setTimeout", "setInterval", "requestAnimationFrame", "queueMicrotask",
                      "requestIdleCallback"]) {
    const orig = W[name];
    if (typeof orig !== "function") continue;
    W[name] = {[name](fn, ...rest) { return orig.call(this, carry(fn), ...rest); }}[name];
  }
  const then = W.Promise && Promise.prototype.then;
  if (typeof then === "function")
    Object.defineProperty(Promise.prototype, "then", {value: {then(ok, bad) {
      return then.call(this, carry(ok), carry(bad));
    }}.then, writable: true, configurable: true});
  // A node's writes, deduplicated by kind and stack, the latest of each kept.
  const writes = (node, where, kinds, out) => {
    const r = log.get(node);
    if (!r) return;
    for (const [kind, err, n, chain] of r.first.concat(r.last))
      if (!kinds || kinds.includes(kind))
        out.push({kind, where, seq: n, stack: String(err.stack || ""),
                  scheduled: (chain || []).map((e) => String(e.stack || ""))});
  };
  const latest = (ws, limit) => {
    const by = new Map();
    for (const w of ws) {
      const k = w.kind + "\n" + w.stack;
      if (!by.has(k) || by.get(k).seq < w.seq) by.set(k, w);
    }
    return [...by.values()].sort((a, b) => a.seq - b.seq).slice(-limit);
  };
  // The element's own writes, its descendants' (the latest `limit`), and the child and HTML
  // writes of its ancestors (the latest 4), each group in the order they happened.
  const read = (el, limit) => {
    const own = [], inside = [], around = [];
    writes(el, "self", null, own);
    if (el.querySelectorAll) {
      let n = 0;
      for (const d of el.querySelectorAll("*")) {
        if (++n > 200) break;
        writes(d, "inside", null, inside);
      }
    }
    for (let a = el.parentNode; a; a = a.parentNode)
      writes(a, "around", ["child", "html"], around);
    return [...latest(own, limit), ...latest(inside, limit), ...latest(around, 4)];
  };
  Object.defineProperty(window, READER, {value: read, enumerable: false, writable: false,
                                         configurable: false});
})();
""" % {"reader": READER, "first": FIRST, "last": LAST, "schedulers": SCHEDULERS}


async def read_writers(locator: Locator, limit: int = 12, timeout_s: float = 2.0
                       ) -> list[dict[str, Any]]:
    """The recorded writes of the elements `locator` matches (at most 3 elements).

    Args:
      locator: the failing step's locator, on a page whose context has `WRITERS_JS`.
      limit: the most writes returned per element and group (the latest ones).
      timeout_s: a page that cannot answer in this time gives none.

    Returns:
      [{"kind": text|html|value|attr|class|style|child|draw, "where": self|inside|around,
        "seq": the write's place in the page's order of writes, "frames": [parsed stack
        frames, then those of the stacks that scheduled it]}], deduplicated; [] when the
        page cannot say.
    """
    from evaluators.sandbox.browser import parse_stack  # browser installs WRITERS_JS

    js = (f"(els, limit) => els.slice(0, 3).flatMap((e) => "
          f"typeof window.{READER} === 'function' ? window.{READER}(e, limit) : [])")
    try:
        raw = await asyncio.wait_for(locator.evaluate_all(js, limit), timeout_s)
    except Exception:  # noqa: BLE001 - a closed, hung or navigated page: no evidence
        return []
    out, seen = [], set()
    for w in raw if isinstance(raw, list) else ():
        if not isinstance(w, dict):
            continue
        key = (w.get("kind"), w.get("where"), w.get("stack"))
        if key in seen:
            continue
        seen.add(key)
        frames = parse_stack(str(w.get("stack") or ""))
        chain = w.get("scheduled")
        for stack in chain if isinstance(chain, list) else ():
            frames += parse_stack(str(stack or ""))
        if frames:
            seq = w.get("seq")
            out.append({"kind": str(w.get("kind")), "where": str(w.get("where")),
                        "seq": seq if isinstance(seq, int) else 0, "frames": frames})
    return out
