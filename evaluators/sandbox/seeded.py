"""A fixed-seed Math.random for every document a page loads.

Rewards must be a function of the response: an app that draws random values (a "new
example" button that can draw the example already shown, particles placed at random, a
shuffled quiz) would otherwise pass a probe in one scoring and fail it in the next, and
RL would learn from that noise. With a seed, every document starts the same sequence, so
the same app, driven by the same steps, sees the same draws in every scoring of it.

The generator is mulberry32 (a 32-bit state, full period 2**32, passes the usual
statistical batteries at this size), enough for an app's visual randomness. Only
documents are reached (init scripts do not run in web workers), and
``crypto.getRandomValues`` is left alone: apps use it for identifiers, not for what a
probe checks.
"""

from __future__ import annotations


def seeded_random_js(seed: int) -> str:
    """An init script that replaces Math.random with a generator started at `seed`."""
    state = int(seed) & 0xFFFFFFFF
    return f"""(() => {{
  let s = {state} | 0;
  function random() {{
    s = (s + 0x6D2B79F5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }}
  Object.defineProperty(Math, "random", {{value: random, writable: true, configurable: true}});
}})();
"""
