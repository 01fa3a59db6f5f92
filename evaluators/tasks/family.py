"""Small interactive-app task families with executable probes and short reference solutions.

Each family builds tasks in the format of shared/specs/task-format.md (version 1): a prompt
that names the element ids its probes use, 2-4 probed rubrics and a reference response. The
references are deliberately tiny and share one skeleton per family, so that a transformer of a
million or two parameters can learn them by supervised fine-tuning before RL; ids, labels and
numbers vary between tasks so that it has to read the prompt.

Pure Python (no JAX): the evaluator, the tokenizer and the tests use it on any machine.

Usage:
    python -m evaluators.tasks.family --n 100 --seed 0 \
        --tasks tasks.jsonl --responses refs.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from decimal import ROUND_HALF_UP, Decimal
from typing import Callable, NamedTuple

SOURCE = "rcca-taskfamily"
TIMEOUT_MS = 2000
LEAD_IN = "Here is the app:"


class _Built(NamedTuple):
    """What a family builder returns: everything of a task but its id and meta."""

    prompt: str
    rubrics: list[dict]
    html: str
    difficulty: str


# --- probe, page and JavaScript helpers -------------------------------------------------------

def _click(loc) -> dict:
    return {"do": "click", "locator": loc}


def _fill(loc, value) -> dict:
    return {"do": "fill", "locator": loc, "value": str(value)}


def _expect(kind: str, loc, value=None, **extra) -> dict:
    step = {"expect": kind, "locator": loc}
    if value is not None:
        step["value"] = value
    step.update(extra)
    return step


def _rubric(rid: str, text: str, kind: str, importance: str, steps: list[dict]) -> dict:
    return {"id": rid, "text": text, "kind": kind, "importance": importance,
            "probe": {"steps": steps, "timeout_ms": TIMEOUT_MS}}


def _js_str(s: str) -> str:
    """A single-quoted JavaScript string literal."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _get(el_id: str) -> str:
    return f"document.getElementById({_js_str(el_id)})"


def _on(el_id: str, event: str, *lines: str) -> str:
    """An event handler assigned as a property: shorter than addEventListener, same effect."""
    body = "\n".join("  " + line for line in lines)
    return f"{_get(el_id)}.{event} = () => {{\n{body}\n}};"


def _document(title: str, body: list[str], script: list[str]) -> str:
    return "\n".join(["<!DOCTYPE html>", "<html>", "<body>", f"<h1>{title}</h1>", *body,
                      "<script>", *script, "</script>", "</body>", "</html>"])


def _num(x: float) -> str:
    """A number as JavaScript source prints it (60.0 -> 60); Python's repr is also shortest."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _to_fixed(x: float, digits: int) -> str:
    """Number.prototype.toFixed for non-negative x: the exact double, ties away from zero."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


# --- counter ----------------------------------------------------------------------------------

_COUNT_IDS = ("count", "total", "score", "tally", "clicks", "points")
_INC_IDS = ("inc", "add", "plus", "bump", "up", "more")
_RESET_IDS = ("reset", "clear", "zero")
_COUNTER_TITLES = ("Counter", "Click Counter", "Tally", "Score Keeper")
_STEP_LABELS = ("Add {s}", "+{s}", "Plus {s}", "Step {s}")


def _counter(rng: random.Random) -> _Built:
    shown, inc = rng.choice(_COUNT_IDS), rng.choice(_INC_IDS)
    title, step = rng.choice(_COUNTER_TITLES), rng.randint(1, 9)
    start = rng.choice((0, 0, rng.randint(1, 20)))
    label = rng.choice(_STEP_LABELS).format(s=step)
    prompt = (f"Build a counter app titled '{title}'. Show the count in #{shown}, starting at "
              f"{start}. A button #{inc} labelled '{label}' adds {step} to the count on each "
              "click.")
    body = [f'<p id="{shown}">{start}</p>', f'<button id="{inc}">{label}</button>']
    script = [f"let n = {start};", f"const out = {_get(shown)};",
              _on(inc, "onclick", f"n += {step};", "out.textContent = n;")]
    rubrics = [
        _rubric("starts", f"#{shown} shows {start} after load.", "initial", "core",
                [_expect("text", f"#{shown}", str(start))]),
        _rubric("one-click", f"One click on #{inc} makes the count {start + step}.", "dynamic",
                "core", [_click(f"#{inc}"), _expect("text", f"#{shown}", str(start + step))]),
        _rubric("three-clicks", f"Three clicks on #{inc} make the count {start + 3 * step}.",
                "dynamic", "behavior",
                [_click(f"#{inc}")] * 3 + [_expect("text", f"#{shown}", str(start + 3 * step))]),
    ]
    if rng.random() < 0.5:
        button = {"role": "button", "name": label}
        rubrics.append(_rubric("label", f"A button labelled '{label}' is visible.", "initial",
                               "rendering", [_expect("visible", button)]))
        return _Built(prompt, rubrics, _document(title, body, script), "easy")
    reset = rng.choice(_RESET_IDS)
    prompt += f" A button #{reset} labelled 'Reset' sets the count back to {start}."
    body.append(f'<button id="{reset}">Reset</button>')
    script.append(_on(reset, "onclick", f"n = {start};", "out.textContent = n;"))
    rubrics.append(_rubric("reset", f"#{reset} sets the count back to {start}.", "dynamic",
                           "behavior", [_click(f"#{inc}"), _click(f"#{inc}"), _click(f"#{reset}"),
                                        _expect("text", f"#{shown}", str(start))]))
    return _Built(prompt, rubrics, _document(title, body, script), "medium")


# --- toggle -----------------------------------------------------------------------------------

_TOGGLE_BTN_IDS = ("toggle", "switch", "flip", "show", "power")
_PANEL_IDS = ("panel", "details", "info", "box", "extra", "note")
_PANEL_TEXTS = ("The answer is 42.", "Extra details live here.", "Surprise!",
                "Thanks for reading.", "The café opens at 9.",
                "Fun fact: owls can't move their eyes.")
_SHOW_TITLES = ("Show More", "Details", "Toggle Panel", "Spoiler")
_SHOW_LABELS = ("Toggle", "Show/Hide", "Details", "More")
_STATUS_IDS = ("status", "state", "mode", "lamp")
_STATE_PAIRS = (("Off", "On"), ("Day", "Night"), ("Light", "Dark"), ("Closed", "Open"),
                ("Paused", "Playing"), ("Locked", "Unlocked"))
_STATE_CLASSES = ("on", "active", "lit", "selected")
_SWITCH_TITLES = ("Switch", "Light Switch", "Mode Toggle", "Power")


def _toggle_show(rng: random.Random) -> _Built:
    btn, panel = rng.choice(_TOGGLE_BTN_IDS), rng.choice(_PANEL_IDS)
    title, label = rng.choice(_SHOW_TITLES), rng.choice(_SHOW_LABELS)
    text = rng.choice(_PANEL_TEXTS)
    prompt = (f"Build a show/hide toggle titled '{title}'. A button #{btn} labelled '{label}' "
              f"shows and hides #{panel}, which holds the text '{text}' and is hidden at first.")
    body = [f'<button id="{btn}">{label}</button>', f'<div id="{panel}" hidden>{text}</div>']
    script = [f"const p = {_get(panel)};", _on(btn, "onclick", "p.hidden = !p.hidden;")]
    sel = f"#{panel}"
    rubrics = [
        _rubric("starts-hidden", f"{sel} is hidden after load.", "initial", "core",
                [_expect("hidden", sel)]),
        _rubric("click-shows", f"Clicking #{btn} shows {sel} with its text.", "dynamic", "core",
                [_click(f"#{btn}"), _expect("visible", sel), _expect("contains_text", sel, text)]),
        _rubric("click-twice-hides", f"A second click on #{btn} hides {sel} again.", "dynamic",
                "behavior", [_click(f"#{btn}"), _expect("visible", sel), _click(f"#{btn}"),
                             _expect("hidden", sel)]),
    ]
    return _Built(prompt, rubrics, _document(title, body, script), "easy")


def _toggle_switch(rng: random.Random) -> _Built:
    btn, status = rng.choice(_TOGGLE_BTN_IDS), rng.choice(_STATUS_IDS)
    (off, on), cls = rng.choice(_STATE_PAIRS), rng.choice(_STATE_CLASSES)
    title = rng.choice(_SWITCH_TITLES)
    prompt = (f"Build a switch titled '{title}'. #{status} shows '{off}' at first; each click on "
              f"the button #{btn} switches it between '{off}' and '{on}'. While it shows '{on}', "
              f"#{status} has the class '{cls}'.")
    body = [f'<button id="{btn}">Switch</button>', f'<p id="{status}">{off}</p>']
    script = [f"const s = {_get(status)};",
              _on(btn, "onclick", f"const on = s.textContent === {_js_str(off)};",
                  f"s.textContent = on ? {_js_str(on)} : {_js_str(off)};",
                  f"s.classList.toggle({_js_str(cls)}, on);")]
    sel = f"#{status}"
    rubrics = [
        _rubric("starts-off", f"{sel} shows '{off}' after load.", "initial", "core",
                [_expect("text", sel, off)]),
        _rubric("click-switches", f"A click on #{btn} makes {sel} show '{on}'.", "dynamic", "core",
                [_click(f"#{btn}"), _expect("text", sel, on)]),
        _rubric("click-twice-back", f"A second click switches {sel} back to '{off}'.", "dynamic",
                "behavior", [_click(f"#{btn}"), _expect("text", sel, on), _click(f"#{btn}"),
                             _expect("text", sel, off)]),
        _rubric("state-class", f"While on, {sel} has the class '{cls}'.", "dynamic", "rendering",
                [_click(f"#{btn}"), _expect("class", sel, {"regex": rf"\b{cls}\b"})]),
    ]
    return _Built(prompt, rubrics, _document(title, body, script), "medium")


_TOGGLE_VARIANTS: tuple[Callable[[random.Random], _Built], ...] = (_toggle_show, _toggle_switch)


def _toggle(rng: random.Random) -> _Built:
    return rng.choice(_TOGGLE_VARIANTS)(rng)


# --- greeting form ----------------------------------------------------------------------------

_NAME_IDS = ("name", "who", "user", "guest", "visitor")
_GREET_BTN_IDS = ("greet", "go", "say", "hello-btn", "submit")
_GREET_OUT_IDS = ("out", "msg", "greeting", "result", "reply")
_GREET_WORDS = ("Hello", "Hi", "Welcome", "Hey", "Greetings")
_GREET_TITLES = ("Greeter", "Say Hello", "Welcome", "Greeting Card")
_PEOPLE = ("Ada", "Grace", "Linus", "Alan", "Maya", "Omar", "Zoë", "José", "Chen", "Priya")
_FALLBACKS = ("Please type a name.", "Who are you?", "Name needed!")


def _greeting(rng: random.Random) -> _Built:
    inp, btn, out = rng.choice(_NAME_IDS), rng.choice(_GREET_BTN_IDS), rng.choice(_GREET_OUT_IDS)
    word, mark, title = rng.choice(_GREET_WORDS), rng.choice("!."), rng.choice(_GREET_TITLES)
    first, second = rng.sample(_PEOPLE, 2)
    prompt = (f"Build a greeting form titled '{title}'. It has a text input #{inp} and a button "
              f"#{btn} labelled 'Greet'. Clicking #{btn} writes '{word}, NAME{mark}' into "
              f"#{out}, where NAME is the text typed in #{inp}. #{out} is empty at first.")
    greeting = f"{_js_str(word + ', ')} + i.value + {_js_str(mark)}"
    medium = rng.random() < 0.5
    fallback = rng.choice(_FALLBACKS)
    if medium:
        prompt += f" If the input is empty, #{out} shows '{fallback}' instead."
        greeting = f"i.value ? {greeting} : {_js_str(fallback)}"
    body = [f'<input id="{inp}">', f'<button id="{btn}">Greet</button>', f'<p id="{out}"></p>']
    script = [f"const i = {_get(inp)};",
              _on(btn, "onclick", f"{_get(out)}.textContent = {greeting};")]
    o = f"#{out}"
    rubrics = [
        _rubric("starts-empty", f"#{inp} is visible and {o} is empty after load.", "initial",
                "behavior", [_expect("visible", f"#{inp}"), _expect("empty", o)]),
        _rubric("greets", f"Typing {first} and clicking #{btn} shows '{word}, {first}{mark}'.",
                "dynamic", "core", [_fill(f"#{inp}", first), _click(f"#{btn}"),
                                    _expect("text", o, f"{word}, {first}{mark}")]),
        _rubric("greets-again", "A second name replaces the first greeting.", "dynamic",
                "behavior", [_fill(f"#{inp}", first), _click(f"#{btn}"), _fill(f"#{inp}", second),
                             _click(f"#{btn}"), _expect("text", o, f"{word}, {second}{mark}")]),
    ]
    if medium:
        rubrics.append(_rubric("empty-input", f"With an empty input, {o} shows '{fallback}'.",
                               "dynamic", "behavior",
                               [_click(f"#{btn}"), _expect("text", o, fallback)]))
    return _Built(prompt, rubrics, _document(title, body, script), "medium" if medium else "easy")


# --- list -------------------------------------------------------------------------------------

_ITEM_IDS = ("item", "entry", "new-item", "task", "thing")
_ADD_IDS = ("add", "add-btn", "push", "save")
_LIST_IDS = ("items", "list", "todo", "things")
_SIZE_IDS = ("count", "n-items", "size", "how-many")
_LIST_TITLES = ("Shopping List", "To-Do", "My List", "Notes")
_WORDS = ("milk", "eggs", "bread", "tea", "apples", "rice", "call mum", "crème fraîche",
          "buy stamps", "feed the cat")


def _list(rng: random.Random) -> _Built:
    inp, add = rng.choice(_ITEM_IDS), rng.choice(_ADD_IDS)
    ul, size = rng.choice(_LIST_IDS), rng.choice(_SIZE_IDS)
    title = rng.choice(_LIST_TITLES)
    first, second = rng.sample(_WORDS, 2)
    prompt = (f"Build a list app titled '{title}'. It has a text input #{inp}, a button #{add} "
              f"labelled 'Add' and a list <ul id=\"{ul}\">. Clicking #{add} appends the input's "
              f"text as a new <li>. #{size} always shows how many items the list has (0 at first).")
    medium = rng.random() < 0.5
    lines = ["const li = document.createElement('li');", "li.textContent = i.value;",
             "ul.append(li);"]
    if medium:
        prompt += (" Nothing is added when the input is empty, and the input is cleared after "
                   "adding.")
        lines = ["if (!i.value) return;", *lines, "i.value = '';"]
    lines.append(f"{_get(size)}.textContent = ul.children.length;")
    body = [f'<input id="{inp}">', f'<button id="{add}">Add</button>', f'<ul id="{ul}"></ul>',
            f'<p id="{size}">0</p>']
    script = [f"const i = {_get(inp)};", f"const ul = {_get(ul)};", _on(add, "onclick", *lines)]
    li = f"#{ul} li"
    rubrics = [
        _rubric("starts-empty", f"The list is empty and #{size} shows 0 after load.", "initial",
                "core", [_expect("count", li, 0), _expect("text", f"#{size}", "0")]),
        _rubric("adds-item", f"Adding '{first}' appends one <li> and #{size} shows 1.", "dynamic",
                "core", [_fill(f"#{inp}", first), _click(f"#{add}"), _expect("count", li, 1),
                         _expect("text", {"css": li, "nth": 0}, first),
                         _expect("text", f"#{size}", "1")]),
        _rubric("adds-two", f"Two items are listed in order and #{size} shows 2.", "dynamic",
                "behavior", [_fill(f"#{inp}", first), _click(f"#{add}"), _fill(f"#{inp}", second),
                             _click(f"#{add}"), _expect("count", li, 2),
                             _expect("text", {"css": li, "nth": "last"}, second),
                             _expect("text", f"#{size}", "2")]),
    ]
    if medium:
        rubrics.append(_rubric("ignores-empty", "An empty input adds nothing; adding clears it.",
                               "dynamic", "behavior",
                               [_click(f"#{add}"), _fill(f"#{inp}", first), _click(f"#{add}"),
                                _expect("count", li, 1), _expect("value", f"#{inp}", "")]))
    return _Built(prompt, rubrics, _document(title, body, script), "medium" if medium else "easy")


# --- tabs -------------------------------------------------------------------------------------

_TAB_SETS = (("home", "about", "contact"), ("news", "sports", "weather"),
             ("intro", "usage", "faq"), ("day", "week", "month"), ("red", "green", "blue"),
             ("cats", "dogs", "birds"))
_TAB_BTN_PATTERNS = ("{}-tab", "tab-{}", "show-{}", "btn-{}")
_TAB_PANEL_PATTERNS = ("{}", "{}-panel", "panel-{}")
_TAB_TEXTS = ("{} content", "All about {}.", "This is the {} tab.")
_TAB_TITLES = ("Tabs", "Sections", "Info", "Browse")


def _js_pattern(pattern: str, var: str) -> str:
    """A JavaScript expression that fills `pattern`'s {} with the variable `var`."""
    head, tail = pattern.split("{}")
    return " + ".join([*([_js_str(head)] if head else []), var, *([_js_str(tail)] if tail else [])])


def _tabs(rng: random.Random) -> _Built:
    count = rng.choice((2, 3))
    names = rng.choice(_TAB_SETS)[:count]
    btn_pat, panel_pat = rng.choice(_TAB_BTN_PATTERNS), rng.choice(_TAB_PANEL_PATTERNS)
    text_pat, title = rng.choice(_TAB_TEXTS), rng.choice(_TAB_TITLES)
    btns = [btn_pat.format(n) for n in names]
    panels = [panel_pat.format(n) for n in names]
    texts = [text_pat.format(n.capitalize()) for n in names]
    listing = ", ".join(f"#{b} shows #{p} ('{t}')" for b, p, t in zip(btns, panels, texts))
    prompt = (f"Build tabs titled '{title}'. One button per tab switches which panel is visible, "
              f"and only one panel is visible at a time: {listing}. At first only #{panels[0]} "
              "is visible.")
    body = [f'<button id="{b}">{n.capitalize()}</button>' for b, n in zip(btns, names)]
    body += [f'<div id="{p}"{" hidden" if k else ""}>{t}</div>'
             for k, (p, t) in enumerate(zip(panels, texts))]
    script = [f"const names = [{', '.join(_js_str(n) for n in names)}];",
              "for (const n of names) {",
              f"  document.getElementById({_js_pattern(btn_pat, 'n')}).onclick = () => {{",
              f"    for (const m of names) document.getElementById({_js_pattern(panel_pat, 'm')})"
              ".hidden = m !== n;",
              "  };", "}"]

    def only(k: int) -> list[dict]:
        return [_expect("visible" if j == k else "hidden", f"#{p}") for j, p in enumerate(panels)]

    rubrics = [
        _rubric("first-visible", f"Only #{panels[0]} is visible after load.", "initial", "core",
                only(0)),
        _rubric("switch", f"Clicking #{btns[1]} shows only #{panels[1]}.", "dynamic", "core",
                [_click(f"#{btns[1]}"), *only(1)]),
        _rubric("switch-back", f"Clicking #{btns[-1]} then #{btns[0]} shows only #{panels[0]}.",
                "dynamic", "behavior", [_click(f"#{btns[-1]}"), *only(count - 1),
                                        _click(f"#{btns[0]}"), *only(0)]),
        _rubric("panel-text", f"#{panels[0]} reads '{texts[0]}'.", "initial", "rendering",
                [_expect("contains_text", f"#{panels[0]}", texts[0])]),
    ]
    difficulty = "easy" if count == 2 else "medium"
    return _Built(prompt, rubrics, _document(title, body, script), difficulty)


# --- slider -----------------------------------------------------------------------------------

_RANGE_IDS = ("level", "volume", "size", "speed", "zoom", "brightness", "opacity")
_READOUT_PATTERNS = ("{}-out", "{}-value", "{}-label", "readout", "display")
_UNITS = ("", "%", " px", " ms", " dB")
_SLIDER_TITLES = ("{}", "{} Control", "{} Slider")


def _slider(rng: random.Random) -> _Built:
    rid = rng.choice(_RANGE_IDS)
    out = rng.choice(_READOUT_PATTERNS).format(rid)
    title = rng.choice(_SLIDER_TITLES).format(rid.capitalize())
    lo, hi = rng.choice((0, 1)), rng.choice((10, 20, 50, 100))
    start = rng.randint(lo, hi)
    factor, unit = rng.choice((1, 1, 2, 5, 10)), rng.choice(_UNITS)
    v1, v2 = rng.sample([v for v in range(lo, hi + 1) if v != start], 2)

    def shown(v: int) -> str:
        return f"{v * factor}{unit}"

    scaled = f" times {factor}" if factor != 1 else ""
    prompt = (f"Build a slider titled '{title}'. A range input #{rid} goes from {lo} to {hi} "
              f"(default {start}); #{out} shows its value{scaled}"
              + (f" followed by '{unit}'" if unit else "")
              + f", e.g. '{shown(start)}' at first, and updates while the slider moves.")
    expr = "s.value" + (f" * {factor}" if factor != 1 else "")
    expr += f" + {_js_str(unit)}" if unit else ""
    body = [f'<input id="{rid}" type="range" min="{lo}" max="{hi}" value="{start}">',
            f'<span id="{out}">{shown(start)}</span>']
    script = [f"const s = {_get(rid)};", "s.oninput = () => {",
              f"  {_get(out)}.textContent = {expr};", "};"]
    o, r = f"#{out}", f"#{rid}"
    rubrics = [
        _rubric("shows-default", f"{o} shows '{shown(start)}' after load.", "initial", "core",
                [_expect("text", o, shown(start))]),
        _rubric("range-bounds", f"{r} is a range from {lo} to {hi}.", "initial", "rendering",
                [_expect("attribute", r, str(lo), name="min"),
                 _expect("attribute", r, str(hi), name="max")]),
        _rubric("follows-slider", f"Setting {r} to {v1} shows '{shown(v1)}'.", "dynamic", "core",
                [_fill(r, v1), _expect("text", o, shown(v1))]),
        _rubric("follows-again", f"Moving {r} again to {v2} shows '{shown(v2)}'.", "dynamic",
                "behavior", [_fill(r, v1), _expect("text", o, shown(v1)), _fill(r, v2),
                             _expect("text", o, shown(v2))]),
    ]
    difficulty = "easy" if factor == 1 else "medium"
    return _Built(prompt, rubrics, _document(title, body, script), difficulty)


# --- converter --------------------------------------------------------------------------------

class _Conversion(NamedTuple):
    src: str
    dst: str
    src_ids: tuple[str, ...]
    dst_ids: tuple[str, ...]
    factor: float | None  # None: a rate drawn per task (currencies)
    offset: float = 0.0


_CONVERSIONS = (
    _Conversion("kilometres", "miles", ("km", "kilometres", "dist-km"), ("miles", "mi", "dist-mi"),
                0.621371),
    _Conversion("Celsius", "Fahrenheit", ("celsius", "c", "temp-c"), ("fahrenheit", "f", "temp-f"),
                1.8, 32.0),
    _Conversion("miles", "kilometres", ("miles", "mi", "dist-mi"), ("km", "kilometres", "dist-km"),
                1.609344),
    _Conversion("cups", "millilitres", ("cups", "cup", "vol-cups"), ("ml", "millilitres", "vol-ml"),
                236.588),
    _Conversion("kilograms", "pounds", ("kg", "kilos", "mass-kg"), ("lb", "pounds", "mass-lb"),
                2.20462),
    _Conversion("inches", "centimetres", ("inches", "inch", "len-in"),
                ("cm", "centimetres", "len-cm"), 2.54),
    _Conversion("metres", "feet", ("metres", "m", "len-m"), ("feet", "ft", "len-ft"), 3.28084),
    _Conversion("hours", "minutes", ("hours", "h", "time-h"), ("minutes", "min", "time-min"), 60.0),
    _Conversion("euros", "dollars", ("eur", "euros", "amount"), ("usd", "dollars", "converted"),
                None),
)


def _converter(rng: random.Random) -> _Built:
    conv = rng.choice(_CONVERSIONS)
    inp, out = rng.choice(conv.src_ids), rng.choice(conv.dst_ids)
    factor = conv.factor if conv.factor is not None else round(rng.uniform(0.8, 1.4), 2)
    digits, start = rng.choice((1, 2, 2, 3)), rng.choice((0, 1, 10, 100))
    # v1 differs from the initial value, so that its probe can only pass if the page reacts.
    v1, v2 = rng.choice([v for v in range(2, 100) if v != start]), f"{rng.randint(1, 50)}.5"

    def shown(v) -> str:
        # The same double arithmetic the page does: ToNumber(value) * factor + offset.
        return _to_fixed(float(v) * factor + conv.offset, digits)

    title = f"{conv.src.capitalize()} to {conv.dst.capitalize()}"
    formula = f"{conv.dst} = {conv.src} × {_num(factor)}"
    calc = f"i.value * {_num(factor)}"
    if conv.offset:
        formula += f" + {_num(conv.offset)}"
        calc += f" + {_num(conv.offset)}"
    prompt = (f"Build a converter titled '{title}'. A number input #{inp} (initial value {start}) "
              f"holds {conv.src}; #{out} shows the value in {conv.dst} ({formula}) with exactly "
              f"{digits} decimal{'s' if digits > 1 else ''}, updated as the user types.")
    body = [f'<input id="{inp}" type="number" value="{start}">',
            f'<p id="{out}">{shown(start)}</p>']
    script = [f"const i = {_get(inp)};", "i.oninput = () => {",
              f"  {_get(out)}.textContent = ({calc}).toFixed({digits});", "};"]
    o, n = f"#{out}", f"#{inp}"
    rubrics = [
        _rubric("shows-default", f"{o} shows '{shown(start)}' after load.", "initial", "core",
                [_expect("text", o, shown(start))]),
        _rubric("number-input", f"{n} is a number input.", "initial", "rendering",
                [_expect("attribute", n, "number", name="type")]),
        _rubric("converts", f"Typing {v1} into {n} shows '{shown(v1)}'.", "dynamic", "core",
                [_fill(n, v1), _expect("text", o, shown(v1))]),
        _rubric("converts-decimal", f"Typing {v2} shows '{shown(v2)}'.", "dynamic", "behavior",
                [_fill(n, v1), _expect("text", o, shown(v1)), _fill(n, v2),
                 _expect("text", o, shown(v2))]),
    ]
    hard = conv.offset or conv.factor is None or digits == 3
    return _Built(prompt, rubrics, _document(title, body, script), "medium" if hard else "easy")


# --- public API -------------------------------------------------------------------------------

_BUILDERS: dict[str, Callable[[random.Random], _Built]] = {
    "counter": _counter,
    "toggle": _toggle,
    "greeting": _greeting,
    "list": _list,
    "tabs": _tabs,
    "slider": _slider,
    "converter": _converter,
}
FAMILIES: tuple[str, ...] = tuple(_BUILDERS)


def _response(html: str) -> str:
    """The reference answer as a chat model would write it: a lead-in line and a fenced block."""
    return f"{LEAD_IN}\n\n```html\n{html}\n```\n"


def make_task(family: str, index: int, seed: int = 0) -> dict:
    """Builds task `index` of one family; it depends only on (family, index, seed).

    Args:
      family: one of FAMILIES.
      index: the task's number within its family (also its id suffix).
      seed: the generation seed.

    Returns:
      The task dict (spec format), with the reference response in meta.reference.
    """
    # A string seed is hashed with SHA-512 by `random`, so it is stable across processes
    # (unlike hash()) and a task does not change when more tasks are generated.
    rng = random.Random(f"{SOURCE}:{seed}:{family}:{index}")
    built = _BUILDERS[family](rng)
    return {
        "id": f"rcca/{family}-{index:04d}",
        "prompt": built.prompt,
        "rubrics": built.rubrics,
        "meta": {"source": SOURCE, "family": family, "difficulty": built.difficulty,
                 "seed": seed, "reference": _response(built.html)},
    }


def generate(n: int, seed: int = 0, families: tuple[str, ...] | None = None) -> list[dict]:
    """Generates n tasks, taking the families round-robin.

    Args:
      n: number of tasks.
      seed: generation seed; the same (n, seed, families) always gives the same tasks.
      families: names from FAMILIES (default: all, in FAMILIES order).

    Returns:
      Task dicts with unique ids `rcca/<family>-<NNNN>`.

    Raises:
      ValueError: on an unknown family name or an empty family list.
    """
    names = tuple(dict.fromkeys(families if families is not None else FAMILIES))
    unknown = [f for f in names if f not in _BUILDERS]
    if unknown or not names:
        raise ValueError(f"unknown or no families {unknown or names}; expected some of {FAMILIES}")
    return [make_task(names[i % len(names)], i // len(names), seed) for i in range(n)]


def reference_response(task: dict) -> str:
    """The reference response of a generated task."""
    return task["meta"]["reference"]


def _write_jsonl(path: str, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="number of tasks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default="",
                    help=f"comma-separated subset of {','.join(FAMILIES)}")
    ap.add_argument("--tasks", required=True, help="output tasks.jsonl")
    ap.add_argument("--responses", help="output reference responses jsonl")
    args = ap.parse_args(argv)
    families = tuple(f for f in args.families.split(",") if f) or None
    tasks = generate(args.n, args.seed, families)
    _write_jsonl(args.tasks, tasks)
    if args.responses:
        _write_jsonl(args.responses, [{"task_id": t["id"], "response": reference_response(t),
                                       "model": "reference"} for t in tasks])
    print(f"wrote {len(tasks)} tasks to {args.tasks}"
          + (f" and their references to {args.responses}" if args.responses else ""))


if __name__ == "__main__":
    main()
