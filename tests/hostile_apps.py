"""The hostile apps of tests/test_hostile_suite.py and benchmarks/chaos.py, with their verdicts.

Each app attacks the sandbox one way (the issue 17 categories: the network by every
route to loopback, file://, other page slots, popups and navigation, dialogs, print,
downloads, permissions, service workers, storage, loops, memory bombs, malformed and
oversized responses) and says what the evaluator must decide for it. Network attacks go
only to loopback ports that listeners of the caller own: nothing here names an address
outside the machine. Apps that attack and then carry on write ``done`` into ``#out``, which
the ``hostile/done`` task checks; an app that reads something it must not writes
``LEAK ...`` instead, and fails.
"""

from __future__ import annotations

import dataclasses

from evaluators.tasks import Task, parse_task

DONE_TASK = parse_task({"id": "hostile/done", "prompt": "attack, then write done", "rubrics": [
    {"id": "done", "text": "the app carries on", "kind": "initial", "importance": "core",
     "probe": {"steps": [{"expect": "text", "locator": "#out", "value": "done"}],
               "timeout_ms": 20_000}}]})
CLICK_TASK = parse_task({"id": "hostile/click", "prompt": "a button that works", "rubrics": [
    {"id": "click", "text": "clicking #go writes done", "kind": "dynamic", "importance": "core",
     "probe": {"steps": [{"do": "click", "locator": "#go"},
                         {"expect": "text", "locator": "#out", "value": "done"}],
               "timeout_ms": 5000}}]})


CONTROL_ID = "hostile/counter"


def control_task(counter: Task) -> Task:
    """The counter task's rubrics that tell the correct app (1.0) from the partial one (0.82)."""
    keep = ("count-starts-at-zero", "increment", "reset", "positive-class")
    return dataclasses.replace(counter, id=CONTROL_ID,
                               rubrics=tuple(r for r in counter.rubrics if r.id in keep))


@dataclasses.dataclass(frozen=True)
class Hostile:
    """One hostile app and the decision it must get.

    Attributes:
      name: what it does.
      category: the issue's category.
      response: the response text.
      task_id: DONE_TASK's, CLICK_TASK's or the control task's id.
      expect: (gate, reward) of the record.
    """

    name: str
    category: str
    response: str
    task_id: str
    expect: tuple[str | None, float]


def _page(script: str, body: str = "<div id=out>wait</div>", head: str = "") -> str:
    return (f"```html\n<!DOCTYPE html><html><head><meta charset=utf-8>{head}</head><body>{body}"
            f"<script>{script}</script></body></html>\n```")


def _attack(attempts: str) -> str:
    """An app that runs `attempts` (statements; `tries` collects promises), then says done.

    A promise that would wait for ever is cut at 4 s; any response body read is a leak.
    """
    return _page(f"""
const tries = [];
const cut = p => Promise.race([p, new Promise(r => setTimeout(r, 4000))]);
const leak = [];
const read = (what, p) => tries.push(cut(p.then(r => r && r.text ? r.text() : r)
  .then(t => {{ if (t !== undefined && t !== null && String(t).length) leak.push(what); }}, () => 0)));
try {{ {attempts} }} catch (e) {{}}
Promise.allSettled(tries).then(() => {{
  out.textContent = leak.length ? 'LEAK ' + leak.join(', ') : 'done';
}});
""")


def _network(tcp4: int, tcp6: int, udp4: int, udp6: int) -> list[Hostile]:
    """Every route a page has to a loopback service: all must reach nothing."""
    http4, http6 = f"http://127.0.0.1:{tcp4}", f"http://[::1]:{tcp6}"
    literals = [f"http://127.1:{tcp4}/", f"http://2130706433:{tcp4}/", f"http://0x7f000001:{tcp4}/",
                f"http://0.0.0.0:{tcp4}/", f"http://127.0.0.2:{tcp4}/", f"https://127.0.0.1:{tcp4}/"]
    v6 = [f"{http6}/", f"http://[::ffff:127.0.0.1]:{tcp4}/", f"http://[0:0:0:0:0:0:0:1]:{tcp6}/",
          f"https://[::1]:{tcp6}/"]
    names = [f"http://localhost:{tcp4}/", f"http://localhost.localdomain:{tcp4}/",
             f"http://ip6-localhost:{tcp6}/", f"http://x.localhost:{tcp4}/",
             f"http://app.rcca.local:{tcp4}/", f"http://rcca.local:{tcp4}/"]
    fetches = lambda urls: " ".join(f"read({u!r}, fetch({u!r}));" for u in urls)  # noqa: E731
    cases = [
        ("fetch and XHR to a loopback TCP service", "loopback services",
         fetches([f"{http4}/", f"{http4}/x?y=1"]) + f"""
const x = new XMLHttpRequest(); x.open('GET', '{http4}/xhr'); x.send();
const img = new Image(); img.src = '{http4}/img.png';
const s = document.createElement('script'); s.src = '{http4}/s.js'; document.head.append(s);
const l = document.createElement('link'); l.rel = 'stylesheet'; l.href = '{http4}/c.css';
document.head.append(l);
const f = document.createElement('iframe'); f.src = '{http4}/frame'; document.body.append(f);
read('form post', fetch('{http4}/post', {{method: 'POST', body: 'x'.repeat(1000)}}));"""),
        ("IP literals for loopback", "IP literals", fetches(literals)),
        ("IPv6 loopback and mapped addresses", "IPv6", fetches(v6)),
        ("names that mean this machine", "DNS names", fetches(names)),
        ("WebSocket to loopback", "WebSocket", f"""
for (const u of ['ws://127.0.0.1:{tcp4}/', 'ws://[::1]:{tcp6}/', 'wss://localhost:{tcp4}/']) {{
  tries.push(cut(new Promise(r => {{ const w = new WebSocket(u);
    w.onopen = () => {{ leak.push('ws ' + u); r(); }}; w.onerror = r; w.onclose = r; }})));
}}"""),
        ("EventSource to loopback", "EventSource", f"""
for (const u of ['{http4}/events', '{http6}/events']) {{
  tries.push(cut(new Promise(r => {{ const e = new EventSource(u);
    e.onopen = () => {{ leak.push('es ' + u); r(); }}; e.onerror = () => {{ e.close(); r(); }}; }})));
}}"""),
        ("sendBeacon to loopback", "sendBeacon", f"""
navigator.sendBeacon('{http4}/beacon', 'x'); navigator.sendBeacon('{http6}/beacon', 'x');
navigator.sendBeacon('http://localhost:{tcp4}/beacon', new Blob(['y']));"""),
        ("WebRTC STUN/TURN and host candidates on loopback", "WebRTC", f"""
const ice = [{{urls: 'stun:127.0.0.1:{udp4}'}}, {{urls: 'stun:[::1]:{udp6}'}},
  {{urls: ['turn:127.0.0.1:{udp4}?transport=udp', 'turn:127.0.0.1:{tcp4}?transport=tcp'],
    username: 'u', credential: 'c'}}];
tries.push(cut((async () => {{
  const a = new RTCPeerConnection({{iceServers: ice}}), b = new RTCPeerConnection();
  a.createDataChannel('x');
  await a.setLocalDescription(await a.createOffer());
  await b.setRemoteDescription(a.localDescription);
  await b.setLocalDescription(await b.createAnswer());
  await a.setRemoteDescription(b.localDescription);
  await a.addIceCandidate({{candidate: 'candidate:1 1 udp 2122260223 127.0.0.1 {udp4} typ host',
                            sdpMid: '0', sdpMLineIndex: 0}});
  await new Promise(r => setTimeout(r, 3000));
}})()));"""),
        ("WebTransport (HTTP/3 over UDP) to loopback", "WebTransport", f"""
for (const u of ['https://127.0.0.1:{udp4}/', 'https://[::1]:{udp6}/', 'https://localhost:{udp4}/']) {{
  try {{ const t = new WebTransport(u);
    tries.push(cut(t.ready.then(() => leak.push('wt ' + u), () => 0))); }} catch (e) {{}}
}}"""),
        ("navigation to loopback after load", "navigation", f"""
setTimeout(() => {{ const f = document.createElement('form'); f.method = 'POST';
  f.action = '{http4}/form'; document.body.append(f); f.submit(); }}, 50);
setTimeout(() => {{ location.href = '{http4}/away'; }}, 100);
setTimeout(() => {{ location.replace('http://localhost:{tcp4}/'); }}, 200);
setTimeout(() => {{ location.href = 'data:text/html,<p>elsewhere'; }}, 300);
tries.push(new Promise(r => setTimeout(r, 1500)));"""),
    ]
    return [Hostile(name, cat, _attack(js), DONE_TASK.id, (None, 1.0)) for name, cat, js in cases]


def _navigation(tcp4: int) -> list[Hostile]:
    body = "<div id=out>done</div>"
    head = f"<meta http-equiv=refresh content='0;url=http://127.0.0.1:{tcp4}/refresh'>"
    # Leaving while loading aborts the app's own load, as a browser would leave the app.
    leave = f"const f = document.createElement('form'); f.action = 'http://127.0.0.1:{tcp4}/'; " \
            "document.body.append(f); f.submit();"
    return [Hostile("meta refresh to loopback", "navigation", _page("", body, head),
                    DONE_TASK.id, (None, 1.0)),
            Hostile("submits a form to loopback while loading", "navigation",
                    _page(leave, body), DONE_TASK.id, ("runtime", 0.1))]


SNOOP = """
for (let round = 0; round < 3; round++) {
  for (const origin of ['http://app.rcca.local', 'https://app.rcca.local']) {
    for (let n = 0; n < 64; n++) {
      tries.push(fetch(origin + '/.rcca-app/' + n).then(r => r.text())
        .then(t => { if (!t.includes('rcca-snoop-self')) leak.push('slot ' + n); }, () => 0));
    }
  }
}
// rcca-snoop-self
"""


def _browser_features() -> list[Hostile]:
    cases = [
        ("reads file:// URLs", "file://", """
read('fetch', fetch('file:///etc/passwd'));
const x = new XMLHttpRequest(); x.open('GET', 'file:///etc/hostname');
x.onload = () => { if (x.responseText) leak.push('xhr'); }; try { x.send(); } catch (e) {}
const f = document.createElement('iframe'); f.src = 'file:///etc/'; document.body.append(f);
const i = new Image(); i.src = 'file:///usr/share/pixmaps/debian-logo.png';
i.onload = () => leak.push('img');"""),
        ("guesses other page slots' app paths", "other slots", SNOOP),
        ("opens popups", "popups", """
for (let i = 0; i < 20; i++) window.open('about:blank', '_blank');
window.open('https://app.rcca.local/index.html');
const a = document.createElement('a'); a.href = 'about:blank'; a.target = '_blank';
document.body.append(a); a.click();"""),
        ("floods dialogs", "dialogs", """
for (let i = 0; i < 30; i++) { alert('a' + i); confirm('c' + i); prompt('p' + i, 'x'); }
addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = 'stay'; });"""),
        ("prints", "print", "window.print(); window.print();"),
        ("starts downloads", "downloads", """
const b = new Blob(['x'.repeat(1 << 20)], {type: 'application/octet-stream'});
for (let i = 0; i < 5; i++) { const a = document.createElement('a');
  a.href = URL.createObjectURL(b); a.download = 'f' + i + '.bin'; document.body.append(a); a.click(); }
const d = document.createElement('a'); d.href = 'data:application/octet-stream,xyz';
d.download = 'd.bin'; document.body.append(d); d.click();"""),
        ("asks for every permission", "permissions", """
tries.push(cut(new Promise(r => navigator.geolocation.getCurrentPosition(
  p => { leak.push('geo'); r(); }, r))));
tries.push(cut(Notification.requestPermission()));
tries.push(cut(navigator.mediaDevices.getUserMedia({video: true, audio: true})
  .then(() => leak.push('camera'), () => 0)));
tries.push(cut(navigator.clipboard.readText().then(t => { if (t) leak.push('clipboard'); }, () => 0)));
tries.push(cut(navigator.permissions.query({name: 'geolocation'})));"""),
        ("registers service workers", "service workers", """
if (navigator.serviceWorker) {
  tries.push(cut(navigator.serviceWorker.register('/sw.js').then(() => leak.push('sw'), () => 0)));
  tries.push(cut(navigator.serviceWorker.register(URL.createObjectURL(
    new Blob(['self.onfetch = e => 0'], {type: 'text/javascript'}))).then(() => leak.push('sw blob'), () => 0)));
}"""),
        ("fills every storage quota", "storage quota", """
try { for (let i = 0; ; i++) localStorage.setItem('k' + i, 'x'.repeat(1 << 20)); } catch (e) {}
try { for (let i = 0; ; i++) sessionStorage.setItem('k' + i, 'x'.repeat(1 << 20)); } catch (e) {}
document.cookie = 'big=' + 'x'.repeat(4000);
tries.push(cut(new Promise(r => { const o = indexedDB.open('fill', 1);
  o.onupgradeneeded = () => o.result.createObjectStore('s');
  o.onsuccess = async () => { const db = o.result;
    for (let i = 0; i < 40; i++) await new Promise(ok => { const t = db.transaction('s', 'readwrite');
      t.objectStore('s').put(new Uint8Array(8 << 20), i); t.oncomplete = ok; t.onerror = ok; t.onabort = ok; });
    r(); };
  o.onerror = r; })));
tries.push(cut(caches.open('c').then(c => c.put('/x', new Response('x'.repeat(1 << 24)))).catch(() => 0)));"""),
    ]
    return [Hostile(name, cat, _attack(js), DONE_TASK.id, (None, 1.0)) for name, cat, js in cases]


def _loops_and_bombs() -> list[Hostile]:
    button = "<button id=go>go</button><div id=out>wait</div>"
    on_click = lambda js: _page(f"go.onclick = () => {{ {js} }};", button)  # noqa: E731
    return [
        Hostile("infinite loop at load", "loops", _page("while (true) {}"), DONE_TASK.id,
                ("runtime", 0.1)),
        Hostile("infinite loop in a click handler", "loops", on_click("while (true) {}"),
                CLICK_TASK.id, (None, 0.4)),
        Hostile("infinite loops in workers", "loops", _page(
            "const src = URL.createObjectURL(new Blob(['while (true) {}']));"
            "for (let i = 0; i < 4; i++) new Worker(src); out.textContent = 'done';"),
                DONE_TASK.id, (None, 1.0)),
        Hostile("infinite loop in requestAnimationFrame", "loops", _page(
            "requestAnimationFrame(() => { while (true) {} });"), DONE_TASK.id, ("runtime", 0.1)),
        Hostile("JS heap bomb", "memory", _page(
            "const hog = []; while (true) hog.push(new Array(1e6).fill(1.5));"),
                DONE_TASK.id, ("runtime", 0.1)),
        Hostile("2 GiB of ArrayBuffers on a click", "memory", on_click(
            "const h = []; for (let i = 0; i < 16; i++) { const a = new Uint8Array(128 << 20); "
            "a.fill(1); h.push(a); } window.h = h; out.textContent = 'done';"),
                CLICK_TASK.id, ("runtime", 0.1)),
        Hostile("DOM bomb", "memory", _page(
            "for (let i = 0; i < 3e7; i++) document.body.appendChild(document.createElement('div'));"
            "out.textContent = 'done';"), DONE_TASK.id, ("runtime", 0.1)),
        Hostile("string bomb in a click handler", "memory", on_click(
            "let s = 'x'; while (true) s = s + s;"), CLICK_TASK.id, ("runtime", 0.1)),
    ]


def _malformed(good: str) -> list[Hostile]:
    """Responses malformed as text: huge, deep, bad bytes, many blocks."""
    body = "<body>"
    at = good.index(body) + len(body)
    huge = good[:at] + "<!--" + ("x" * 1023 + "\n") * (16 << 10) + "-->" + good[at:]
    giant_line = good[:at] + "<!--" + "y" * (8 << 20) + "-->" + good[at:]
    bad = good[:at] + "<p>\x00 \x01 \x85 \ufffe \ufeff \ud800 \udfff nul-in-string:</p>" + good[at:]
    bad = bad.replace("let count = 0;", "let count = 0; const odd = '\x00\ud83d';")
    blocks = "".join(f"Draft {i}:\n```html\n<p>draft {i}</p>\n```\n" for i in range(1000)) + good
    deep_html = _page("out.textContent = 'done';", "<div>" * 100_000 + "<div id=out>wait</div>")
    deep_js_error = _page("(" * 50_000 + "1 +" + ")" * 50_000)
    deep_js_valid = _page("const a = " + "[" * 100_000 + "]" * 100_000 + "; out.textContent = 'done';")
    unbalanced = "```html\n```html\n" + good.split("```html\n", 1)[1].replace("```", "")
    return [
        Hostile("16 MiB response", "huge responses", huge, CONTROL_ID, (None, 1.0)),
        Hostile("8 MiB on one line", "huge responses", giant_line, CONTROL_ID, (None, 1.0)),
        Hostile("100,000 nested elements", "deep nesting", deep_html, DONE_TASK.id, ("source", 0.0)),
        Hostile("syntax error 50,000 brackets deep", "deep nesting", deep_js_error, DONE_TASK.id,
                ("source", 0.0)),
        Hostile("valid array 100,000 levels deep", "deep nesting", deep_js_valid, DONE_TASK.id,
                ("runtime", 0.1)),
        Hostile("NULs, controls, lone surrogates", "bad bytes", bad, CONTROL_ID, (None, 1.0)),
        Hostile("a thousand html blocks", "a thousand html blocks", blocks, CONTROL_ID,
                (None, 1.0)),
        Hostile("unbalanced fences", "bad bytes", unbalanced, CONTROL_ID, (None, 1.0)),
    ]


def hostile_apps(good: str, tcp4: int, tcp6: int, udp4: int, udp6: int) -> list[Hostile]:
    """Every hostile app; network ones aim at the given loopback listener ports.

    The apps that burn a core until a limit ends them (loops, bombs) are spread out among the others, as they would arrive in a real batch: on 2
    cores, several at once would hold every other page back at admission.
    """
    heavy = _loops_and_bombs()
    calm = [*_network(tcp4, tcp6, udp4, udp6), *_navigation(tcp4), *_browser_features(),
            *_malformed(good)]
    out, every = [], max(1, round(len(calm) / len(heavy)))
    for i, h in enumerate(heavy):
        out.extend(calm[i * every:(i + 1) * every])
        out.append(h)
    out.extend(calm[len(heavy) * every:])
    return out


def hostile_tasks(counter: Task) -> dict[str, Task]:
    """The tasks the hostile apps and the controls are scored against."""
    return {DONE_TASK.id: DONE_TASK, CLICK_TASK.id: CLICK_TASK, CONTROL_ID: control_task(counter)}

