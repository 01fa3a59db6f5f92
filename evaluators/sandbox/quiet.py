"""Whether a loaded page is quiet: nothing pending that could run the app's code again.

A probe step waiting for an element, or for an element's state, waits because something may
still change the page: a timer, an animation frame, a request, an animation. A page with none
of these pending cannot change by itself (the probe sends no input while it waits), so a
missing element will never appear and a wrong text will never turn right: the step's verdict
is decided there and then, and waiting out the timeout only spends time. Broken apps are
mostly such pages (a script threw while loading, nothing runs any more).

`QUIET_JS` (an init script, in every document of the context before the app's own scripts)
wraps the page's scheduling functions and counts what is pending: timeouts and intervals,
animation frames, idle callbacks, observers armed and not yet delivered, messages posted to
the window and not yet delivered, and marks for good any source that can wake the page at any
time (workers, sockets, message channels, audio, history traversal, the task scheduler).
`page_quiet` reads it twice, a gap apart, and also needs no request in flight (counted from
Playwright's events, beyond the page's reach), no running animation (CSS, Web Animations),
no SMIL animation, no playing media, no font loading, no child frame, a complete document,
and no activity (DOM mutation, callback run) between the reads.

Every doubt reads as "not quiet": the only cost of a wrong "not quiet" is the wait the step
would have made anyway. A page that tampers with the counters can only make its own probes
fail sooner.
"""

from __future__ import annotations

import asyncio
import time

QUIET_JS = r"""
(() => {
  const w = window;
  if (Object.getOwnPropertyDescriptor(w, "__rccaQuiet")) return;
  const pending = new Set();
  let forever = false, activity = 0, posted = 0, delivered = 0, armed = 0;
  const track = (key) => { pending.add(key); };
  const done = (key) => { if (pending.delete(key)) activity++; };
  const asFunction = (fn) => typeof fn === "function" ? fn : () => (0, eval)(String(fn));
  const wrapTimer = (setName, kind) => {
    const native = w[setName];
    if (typeof native !== "function") return;
    w[setName] = function (fn, ...rest) {
      const call = asFunction(fn);
      let id;
      const run = function (...a) {
        if (kind === "once") done("t" + id); else activity++;
        return call.apply(this, a);
      };
      id = native.call(w, run, ...rest);
      track("t" + id);
      return id;
    };
  };
  const wrapClear = (name) => {
    const native = w[name];
    if (typeof native !== "function") return;
    w[name] = function (id) { pending.delete("t" + id); return native.call(w, id); };
  };
  wrapTimer("setTimeout", "once");
  wrapTimer("setInterval", "repeat");
  wrapClear("clearTimeout");
  wrapClear("clearInterval");
  const wrapFrame = (reqName, cancelName, prefix) => {
    const req = w[reqName], cancel = w[cancelName];
    if (typeof req !== "function") return;
    w[reqName] = function (cb, ...rest) {
      // Not a function: the native call throws, as it must, and nothing is pending.
      if (typeof cb !== "function") return req.call(w, cb, ...rest);
      let id;
      id = req.call(w, function (...a) { done(prefix + id); return cb.apply(this, a); }, ...rest);
      track(prefix + id);
      return id;
    };
    if (typeof cancel === "function") {
      w[cancelName] = function (id) { pending.delete(prefix + id); return cancel.call(w, id); };
    }
  };
  wrapFrame("requestAnimationFrame", "cancelAnimationFrame", "f");
  wrapFrame("webkitRequestAnimationFrame", "webkitCancelAnimationFrame", "f");
  wrapFrame("requestIdleCallback", "cancelIdleCallback", "i");
  const wake = () => { forever = true; };
  for (const name of ["Worker", "SharedWorker", "WebSocket", "EventSource", "MessageChannel",
                      "BroadcastChannel", "AudioContext", "webkitAudioContext",
                      "OfflineAudioContext", "RTCPeerConnection", "WebTransport"]) {
    const C = w[name];
    if (typeof C !== "function") continue;
    w[name] = new Proxy(C, { construct(t, a, nt) { wake(); return Reflect.construct(t, a, nt); } });
  }
  for (const name of ["back", "forward", "go"]) {
    const f = History.prototype[name];
    History.prototype[name] = function (...a) { wake(); return f.apply(this, a); };
  }
  if (w.scheduler) {
    for (const name of ["postTask", "yield"]) {
      const f = w.scheduler[name];
      if (typeof f === "function") w.scheduler[name] = function (...a) { wake(); return f.apply(this, a); };
    }
  }
  const post = w.postMessage;
  w.postMessage = function (...a) { posted++; return post.apply(this, a); };
  w.addEventListener("message", () => { delivered++; activity++; }, true);
  for (const name of ["ResizeObserver", "IntersectionObserver"]) {
    const C = w[name];
    if (typeof C !== "function") continue;
    const observe = C.prototype.observe;
    const owed = new WeakMap();
    C.prototype.observe = function (...a) {
      const result = observe.apply(this, a);  // a bad target throws here, arming nothing
      if (!owed.get(this)) { owed.set(this, true); armed++; }
      return result;
    };
    w[name] = new Proxy(C, { construct(t, a, nt) {
      const cb = a[0];
      if (typeof cb !== "function") return Reflect.construct(t, a, nt);  // throws, as native
      let self;
      const wrapped = function (...args) {
        if (owed.get(self)) { owed.set(self, false); armed--; }
        activity++;
        return cb.apply(this, args);
      };
      self = Reflect.construct(t, [wrapped, ...a.slice(1)], nt);
      return self;
    } });
  }
  let mutations = 0;
  new MutationObserver((records) => { mutations += records.length; })
    .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  const busy = () => {
    const d = document;
    if (d.readyState !== "complete") return "loading";
    if (d.querySelector("iframe, frame, object, embed, animate, animateMotion, animateTransform, set"))
      return "frames or SMIL";
    if (d.getAnimations && d.getAnimations().some(a => a.playState === "running" || a.pending))
      return "animation";
    for (const m of d.querySelectorAll("video, audio")) if (!m.paused) return "media";
    if (d.fonts && d.fonts.status === "loading") return "fonts";
    return "";
  };
  Object.defineProperty(w, "__rccaQuiet", { value: () => ({
    pending: pending.size + armed + Math.max(0, posted - delivered), forever,
    busy: busy(), activity: activity + mutations,
  }), writable: false, configurable: false, enumerable: false });
})();
"""

# Between the two readings: tasks already queued (a message, a hashchange) run in this gap.
GAP_S = 0.15
_READ_TIMEOUT_S = 1.0


async def _reading(page) -> tuple[dict | None, float]:
    """The tracker's reading and its round trip in ms (None on any doubt)."""
    t0 = time.perf_counter()
    try:
        got = await asyncio.wait_for(
            page.evaluate("() => window.__rccaQuiet ? window.__rccaQuiet() : null"), _READ_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - any doubt is "not quiet"
        got = None
    return (got if isinstance(got, dict) else None), (time.perf_counter() - t0) * 1000


def _still(reading: dict | None, watch) -> bool:
    return (reading is not None and reading.get("pending") == 0 and reading.get("forever") is False
            and reading.get("busy") == "" and not watch.inflight and not watch.loading
            and not watch.crashed and not watch.hung)


async def quiet_rtt(page, watch) -> float | None:
    """None unless nothing pending can change the page any more (two readings `GAP_S` apart);
    else the slower reading's round trip in ms: how fast the page answers now, which a last
    check on a quiet page scales its time limit by (a loaded CPU must not fail it).

    Args:
      page: a loaded app page of a context with `QUIET_JS` installed.
      watch: its PageWatch (requests in flight, load and crash state).
    """
    first, rtt1 = await _reading(page)
    if not _still(first, watch):
        return None
    await asyncio.sleep(GAP_S)
    second, rtt2 = await _reading(page)
    if _still(second, watch) and second["activity"] == first["activity"]:
        return max(rtt1, rtt2)
    return None


async def page_quiet(page, watch) -> bool:
    """Whether nothing pending can change the page any more (`quiet_rtt`)."""
    return await quiet_rtt(page, watch) is not None
