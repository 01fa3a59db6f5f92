"""App kinds with interacting features for the offline generator (no model needed).

Each builder takes a seeded `random.Random` and returns a `Kind`: the request, several rubrics
with probes (initial and dynamic, of every importance) and a reference app. Ids, labels,
limits, data and messages are drawn per task, so one memorised reference does not solve
another; the features interact (a filter survives a sort, a wizard checks each step before
the next, every field of a chained converter drives the others).
"""

from __future__ import annotations

import json
import random
from decimal import ROUND_HALF_UP, Decimal
from typing import Callable, NamedTuple

TIMEOUT_MS = 2000


class Kind(NamedTuple):
    """What a builder returns."""

    request: str
    rubrics: list[dict]
    html: str
    difficulty: str
    domain: str


def _rubric(rid: str, text: str, kind: str, importance: str, steps: list[dict]) -> dict:
    return {"id": rid, "text": text, "kind": kind, "importance": importance,
            "probe": {"steps": steps, "timeout_ms": TIMEOUT_MS}}


def _click(loc) -> dict:
    return {"do": "click", "locator": loc}


def _fill(loc, value) -> dict:
    return {"do": "fill", "locator": loc, "value": str(value)}


def _expect(kind: str, loc, value=None, **extra) -> dict:
    step = {"expect": kind, "locator": loc, **extra}
    if value is not None:
        step["value"] = value
    return step


def _page(title: str, body: list[str], script: list[str], style: str = "") -> str:
    head = f"<style>{style}</style>" if style else ""
    return "\n".join(["<!DOCTYPE html>", "<html>", f"<head><title>{title}</title>{head}</head>",
                      "<body>", f"<h1>{title}</h1>", *body, "<script>", *script, "</script>",
                      "</body>", "</html>"])


def to_fixed(x: float, digits: int) -> str:
    """Number.prototype.toFixed for x >= 0 (the exact double, ties away from zero)."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


# --- a form with validation rules -------------------------------------------------------------

_FORM_TITLES = ("Sign Up", "Join the Club", "Register", "Create Account")
_NAME_IDS = ("username", "user", "handle", "login")
_AGE_IDS = ("age", "years", "user-age")
_SUBMIT_IDS = ("submit", "join", "register", "send")
_GOOD_NAMES = ("marguerite", "bartholomew", "cassiopeia", "ferdinand", "anastasia")


def form(rng: random.Random) -> Kind:
    title, name, age, submit = (rng.choice(x) for x in (_FORM_TITLES, _NAME_IDS, _AGE_IDS, _SUBMIT_IDS))
    min_len, lo = rng.randint(3, 6), rng.randint(10, 18)
    hi = lo + rng.randint(20, 60)
    name_err, age_err, ok = f"{name}-error", f"{age}-error", rng.choice(("welcome", "done", "success"))
    msg_name = f"Username must be at least {min_len} characters"
    msg_age = f"Age must be between {lo} and {hi}"
    good, short = rng.choice(_GOOD_NAMES), "ab"
    request = (f"Build a form titled '{title}' with a text input #{name} and a number input #{age} "
               f"and a button #{submit}. On submit, check both fields: a username shorter than "
               f"{min_len} characters shows '{msg_name}' in #{name_err}; an age outside {lo} to {hi} "
               f"(inclusive) shows '{msg_age}' in #{age_err}. Error elements are empty while their "
               f"field is valid. When both are valid, #{ok} shows 'Welcome, <username>!'; "
               f"otherwise #{ok} is empty.")
    body = [f'<input id="{name}" type="text">', f'<p id="{name_err}" class="error"></p>',
            f'<input id="{age}" type="number">', f'<p id="{age_err}" class="error"></p>',
            f'<button id="{submit}">Submit</button>', f'<p id="{ok}"></p>']
    script = [
        f"document.getElementById('{submit}').addEventListener('click', () => {{",
        f"  const n = document.getElementById('{name}').value.trim();",
        f"  const a = Number(document.getElementById('{age}').value);",
        f"  const nameOk = n.length >= {min_len};",
        f"  const ageOk = document.getElementById('{age}').value !== '' && a >= {lo} && a <= {hi};",
        f"  document.getElementById('{name_err}').textContent = nameOk ? '' : {json.dumps(msg_name)};",
        f"  document.getElementById('{age_err}').textContent = ageOk ? '' : {json.dumps(msg_age)};",
        f"  document.getElementById('{ok}').textContent = nameOk && ageOk ? 'Welcome, ' + n + '!' : '';",
        "});"]
    valid_age = rng.randint(lo, hi)
    rubrics = [
        _rubric("fields", f"#{name}, #{age} and #{submit} are visible.", "initial", "core",
                [_expect("visible", f"#{name}"), _expect("visible", f"#{age}"),
                 _expect("visible", f"#{submit}")]),
        _rubric("short-name", f"A {len(short)}-letter username shows '{msg_name}'.", "dynamic",
                "behavior", [_fill(f"#{name}", short), _fill(f"#{age}", valid_age),
                             _click(f"#{submit}"), _expect("text", f"#{name_err}", msg_name),
                             _expect("text", f"#{ok}", "")]),
        _rubric("age-range", f"Age {hi + 1} shows '{msg_age}' and no username error.", "dynamic",
                "behavior", [_fill(f"#{name}", good), _fill(f"#{age}", hi + 1),
                             _click(f"#{submit}"), _expect("text", f"#{age_err}", msg_age),
                             _expect("text", f"#{name_err}", "")]),
        _rubric("welcome", f"Valid input shows 'Welcome, {good}!' and clears earlier errors.",
                "dynamic", "core",
                [_fill(f"#{name}", short), _click(f"#{submit}"), _fill(f"#{name}", good),
                 _fill(f"#{age}", valid_age), _click(f"#{submit}"),
                 _expect("text", f"#{ok}", f"Welcome, {good}!"), _expect("text", f"#{name_err}", "")]),
    ]
    return Kind(request, rubrics, _page(title, body, script), "medium", "tools")


# --- a sortable, filterable table -------------------------------------------------------------

_ITEMS = ("apple", "apricot", "banana", "blueberry", "cherry", "grape", "lemon", "lime",
          "mango", "melon", "orange", "papaya", "peach", "pear", "plum", "quince")
_TABLE_TITLES = ("Price List", "Market", "Fruit Stand", "Inventory")


def table(rng: random.Random) -> Kind:
    title = rng.choice(_TABLE_TITLES)
    tid, filt, sort, count = (rng.choice(x) for x in (("items", "prices", "stock"),
                              ("filter", "search", "query"), ("sort-price", "by-price", "sort"),
                              ("shown", "count", "n-rows")))
    names = rng.sample(_ITEMS, rng.randint(5, 8))
    prices = rng.sample(range(1, 99), len(names))
    rows = list(zip(names, prices))
    letter = rng.choice(sorted({n[0] for n in names if sum(m[0] == n[0] for m in names) >= 2}
                               or {names[0][0]}))
    kept = [r for r in rows if letter in r[0]]
    cheapest_kept = min(kept, key=lambda r: r[1])[0]
    cheapest = min(rows, key=lambda r: r[1])[0]
    data = json.dumps([{"name": n, "price": p} for n, p in rows])
    request = (f"Build a table titled '{title}': #{tid} lists these items in this order, one row "
               f"each (name, then price): {', '.join(f'{n} {p}' for n, p in rows)}. A text input "
               f"#{filt} keeps only the rows whose name contains its text (case-insensitive), "
               f"as the user types. A button #{sort} sorts the rows by price, cheapest first, and "
               f"the sort stays when the filter changes. #{count} shows '<n> items' for the rows shown.")
    body = [f'<input id="{filt}" placeholder="filter">', f'<button id="{sort}">Sort by price</button>',
            f'<table id="{tid}"><thead><tr><th>Name</th><th>Price</th></tr></thead><tbody></tbody></table>',
            f'<p id="{count}"></p>']
    script = [
        f"const data = {data};", "let sorted = false;",
        "function render() {",
        f"  const q = document.getElementById('{filt}').value.toLowerCase();",
        "  let rows = data.filter(r => r.name.toLowerCase().includes(q));",
        "  if (sorted) rows = rows.slice().sort((a, b) => a.price - b.price);",
        f"  document.querySelector('#{tid} tbody').innerHTML = rows.map(r =>",
        "    `<tr><td>${r.name}</td><td>${r.price}</td></tr>`).join('');",
        f"  document.getElementById('{count}').textContent = rows.length + ' items';",
        "}",
        f"document.getElementById('{filt}').addEventListener('input', render);",
        f"document.getElementById('{sort}').addEventListener('click', () => {{ sorted = true; render(); }});",
        "render();"]
    first = f"#{tid} tbody tr:first-child td:first-child"
    rubrics = [
        _rubric("all-rows", f"#{tid} shows all {len(rows)} rows after load.", "initial", "core",
                [_expect("count", f"#{tid} tbody tr", len(rows)),
                 _expect("text", f"#{count}", f"{len(rows)} items")]),
        _rubric("filter", f"Typing '{letter}' keeps {len(kept)} rows.", "dynamic", "core",
                [_fill(f"#{filt}", letter), _expect("count", f"#{tid} tbody tr", len(kept)),
                 _expect("text", f"#{count}", f"{len(kept)} items")]),
        _rubric("sort", f"Sorting puts {cheapest} first.", "dynamic", "behavior",
                [_click(f"#{sort}"), _expect("text", first, cheapest)]),
        _rubric("sort-then-filter", f"Sorted, then filtered by '{letter}': {cheapest_kept} first.",
                "dynamic", "behavior",
                [_click(f"#{sort}"), _fill(f"#{filt}", letter.upper()),
                 _expect("text", first, cheapest_kept)]),
    ]
    return Kind(request, rubrics, _page(title, body, script), "hard", "tools")


# --- a converter with chained fields ----------------------------------------------------------

_CHAINS = (  # (title, [(id, unit, factor to the first unit)], domain)
    ("Length", [("m", "metres", 1.0), ("ft", "feet", 0.3048), ("in", "inches", 0.0254)], "science"),
    ("Mass", [("kg", "kilograms", 1.0), ("lb", "pounds", 0.45359237), ("oz", "ounces", 0.028349523125)],
     "lifestyle"),
    ("Volume", [("l", "litres", 1.0), ("cup", "cups", 0.2365882365), ("ml", "millilitres", 0.001)],
     "lifestyle"),
    ("Time", [("h", "hours", 1.0), ("min", "minutes", 1 / 60), ("s", "seconds", 1 / 3600)], "science"),
    ("Distance", [("km", "kilometres", 1.0), ("mi", "miles", 1.609344), ("nmi", "nautical miles", 1.852)],
     "science"),
    ("Area", [("m2", "square metres", 1.0), ("ft2", "square feet", 0.09290304),
              ("acre", "acres", 4046.8564224)], "science"),
    ("Speed", [("kmh", "km per hour", 1.0), ("mph", "miles per hour", 1.609344),
               ("ms", "metres per second", 3.6)], "science"),
    ("Energy", [("kj", "kilojoules", 1.0), ("kcal", "kilocalories", 4.184), ("wh", "watt-hours", 3.6)],
     "lifestyle"),
    ("Pressure", [("kpa", "kilopascals", 1.0), ("psi", "psi", 6.894757293168), ("bar", "bar", 100.0)],
     "science"),
    ("Data", [("mb", "megabytes", 1.0), ("gb", "gigabytes", 1000.0), ("kb", "kilobytes", 0.001)],
     "tools"),
)


def chain(rng: random.Random) -> Kind:
    title, units, domain = rng.choice(_CHAINS)
    prefix, digits = rng.choice(("", "in-", "unit-", "val-", "x-")), rng.choice((2, 3, 4))
    ids = [prefix + u[0] for u in units]
    src, dst = rng.sample(range(3), 2)
    value = rng.choice((2, 3, 5, 12, 40, 7.5, 0.25, 64, 100, 1.5))

    def shown(v: float, frm: int, to: int) -> str:
        return to_fixed(v * units[frm][2] / units[to][2], digits)

    request = (f"Build a '{title} Converter' with three number inputs: "
               + ", ".join(f"#{i} ({u[1]})" for i, u in zip(ids, units))
               + f". Typing in any of them updates the other two at once, each with exactly "
               f"{digits} decimals (1 {units[1][1]} = {units[1][2]} {units[0][1]}, 1 {units[2][1]} = "
               f"{units[2][2]} {units[0][1]}); the field being typed in keeps what was typed.")
    body = [f'<label>{u[1]} <input id="{i}" type="number"></label>' for i, u in zip(ids, units)]
    script = [f"const units = {json.dumps([[i, u[2]] for i, u in zip(ids, units)])};",
              "for (const [id, f] of units) {",
              "  document.getElementById(id).addEventListener('input', (e) => {",
              "    const base = Number(e.target.value) * f;",
              "    for (const [other, g] of units) {",
              f"      if (other !== id) document.getElementById(other).value = (base / g).toFixed({digits});",
              "    }", "  });", "}"]
    others = [k for k in range(3) if k != src]
    rubrics = [
        _rubric("inputs", "Three number inputs are shown.", "initial", "core",
                [_expect("attribute", f"#{i}", "number", name="type") for i in ids]),
        _rubric("forward", f"{value} in #{ids[src]} fills the other two.", "dynamic", "core",
                [_fill(f"#{ids[src]}", value)]
                + [_expect("value", f"#{ids[k]}", shown(value, src, k)) for k in others]),
        _rubric("backward", f"{value} in #{ids[dst]} updates #{ids[src]} too.", "dynamic", "behavior",
                [_fill(f"#{ids[src]}", 1), _fill(f"#{ids[dst]}", value),
                 _expect("value", f"#{ids[src]}", shown(value, dst, src))]),
    ]
    return Kind(request, rubrics, _page(f"{title} Converter", body, script), "medium", domain)


# --- a multi-step wizard ----------------------------------------------------------------------

_PLANS = ("basic", "standard", "premium", "family", "student", "starter", "pro", "team",
          "business", "unlimited", "lite", "plus")
_WIZARD_TITLES = ("Sign-up Wizard", "Membership Setup", "Subscription Wizard", "Plan Picker",
                  "Account Setup", "Onboarding")
_NAME_ERRORS = ("Please enter a name", "A name is required", "Name cannot be empty",
                "Tell us your name first")
_PEOPLE = ("Ada", "Grace", "Alan", "Maya", "Omar", "Priya", "Chen", "Lena", "Tariq", "Sofia")


def wizard(rng: random.Random) -> Kind:
    plans = rng.sample(_PLANS, rng.randint(3, 5))
    title, missing = rng.choice(_WIZARD_TITLES), rng.choice(_NAME_ERRORS)
    name_id = rng.choice(("name", "full-name", "customer", "member", "your-name"))
    plan_id = rng.choice(("plan", "tier", "package", "level"))
    nxt, back = rng.choice(("next", "continue", "forward")), rng.choice(("back", "prev", "previous"))
    step = rng.choice(("step", "progress", "position"))
    summary = rng.choice(("summary", "review", "confirm", "result"))
    err = rng.choice(("wizard-error", "error", "warning", "problem"))
    person, choice = rng.choice(_PEOPLE), rng.choice(plans)
    request = (f"Build a 3-step wizard titled '{title}'. #{step} shows 'Step <n> of 3'. Step 1 has a text "
               f"input #{name_id}; step 2 a select #{plan_id} with the options "
               f"{', '.join(plans)} (in this order, values as shown); step 3 shows "
               f"'<name> chose <plan>' in #{summary}. Button #{nxt} goes forward, #{back} back "
               f"(hidden on step 1). Going forward from step 1 with an empty name stays on step 1 "
               f"and shows '{missing}' in #{err}. Only the current step's content is visible.")
    options = "".join(f'<option value="{p}">{p}</option>' for p in plans)
    body = [f'<p id="{step}"></p>', f'<p id="{err}"></p>',
            f'<div class="pane" data-step="1"><input id="{name_id}"></div>',
            f'<div class="pane" data-step="2"><select id="{plan_id}">{options}</select></div>',
            f'<div class="pane" data-step="3"><p id="{summary}"></p></div>',
            f'<button id="{back}">Back</button>', f'<button id="{nxt}">Next</button>']
    script = [
        "let at = 1;", "const $ = (id) => document.getElementById(id);",
        "function show() {",
        f"  $('{step}').textContent = 'Step ' + at + ' of 3';",
        "  for (const p of document.querySelectorAll('.pane')) p.hidden = Number(p.dataset.step) !== at;",
        f"  $('{back}').hidden = at === 1;",
        f"  $('{nxt}').hidden = at === 3;",
        f"  $('{summary}').textContent = $('{name_id}').value.trim() + ' chose ' + $('{plan_id}').value;",
        "}",
        f"$('{nxt}').addEventListener('click', () => {{",
        f"  if (at === 1 && !$('{name_id}').value.trim()) {{ $('{err}').textContent = {json.dumps(missing)}; return; }}",
        f"  $('{err}').textContent = ''; at = Math.min(3, at + 1); show();", "});",
        f"$('{back}').addEventListener('click', () => {{ at = Math.max(1, at - 1); show(); }});",
        "show();"]
    rubrics = [
        _rubric("first-step", "The wizard opens on step 1 without a Back button.", "initial", "core",
                [_expect("text", f"#{step}", "Step 1 of 3"), _expect("visible", f"#{name_id}"),
                 _expect("hidden", f"#{back}")]),
        _rubric("needs-name", "Next with an empty name stays on step 1 with an error.", "dynamic",
                "behavior", [_click(f"#{nxt}"), _expect("text", f"#{err}", missing),
                             _expect("text", f"#{step}", "Step 1 of 3")]),
        _rubric("summary", f"Name {person} and plan {choice} give '{person} chose {choice}'.",
                "dynamic", "core",
                [_fill(f"#{name_id}", person), _click(f"#{nxt}"),
                 {"do": "select_option", "locator": f"#{plan_id}", "value": choice},
                 _click(f"#{nxt}"), _expect("text", f"#{summary}", f"{person} chose {choice}"),
                 _expect("text", f"#{step}", "Step 3 of 3")]),
        _rubric("back", "Back from step 2 returns to step 1 with the name kept.", "dynamic",
                "behavior", [_fill(f"#{name_id}", person), _click(f"#{nxt}"), _click(f"#{back}"),
                             _expect("text", f"#{step}", "Step 1 of 3"),
                             _expect("value", f"#{name_id}", person)]),
    ]
    return Kind(request, rubrics, _page(title, body, script), "hard", "lifestyle")


KINDS: dict[str, Callable[[random.Random], Kind]] = {
    "form": form, "table": table, "chain": chain, "wizard": wizard,
}
