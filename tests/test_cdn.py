"""Tests for the offline CDN mirror (evaluators.cdn).

The first run installs the pinned packages into the default mirror directory
(npm registry needed once, tens of seconds); later runs reuse it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from evaluators import cdn
from evaluators.sandbox.browser import APP_URL, BrowserWorker
from evaluators.cdn import CdnMirror, MirrorHit, default_root, install, response_headers
from evaluators.sandbox.app_server import is_cdn_url
from evaluators.config import BrowserConfig

CHROMIUM = Path("/usr/lib/chromium/chromium")


@pytest.fixture(scope="module")
def mirror() -> CdnMirror:
    install(default_root())
    return CdnMirror(default_root())


def _served_version(hit: MirrorHit) -> str:
    """Reads the version from the package.json of the directory served from."""
    parts = hit.path.parts
    alias_dir = Path(*parts[: parts.index("node_modules") + 2])
    return json.loads((alias_dir / "package.json").read_text())["version"]


# url, npm package, version served, path inside the package, marker in the file
REAL_URLS = [
    ("https://cdn.plot.ly/plotly-latest.min.js", "plotly.js-dist-min", "1.58.5",
     "plotly.min.js", b"plotly.js v1.58.5"),
    ("https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.4.0/p5.js", "p5", "1.4.0",
     "lib/p5.js", b"p5.js v1.4.0"),
    ("https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.4.0/p5.min.js", "p5", "1.4.0",
     "lib/p5.min.js", b"p5.js v1.4.0"),
    ("https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.4.0/addons/p5.sound.min.js", "p5",
     "1.4.0", "lib/addons/p5.sound.min.js", None),
    ("https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.7.0/p5.min.js", "p5", "1.7.0",
     "lib/p5.min.js", b"p5.js v1.7.0"),
    ("https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.9.0/p5.min.js", "p5", "1.9.0",
     "lib/p5.min.js", b"p5.js v1.9.0"),
    ("https://cdnjs.cloudflare.com/ajax/libs/three.js/r128/three.min.js", "three", "0.128.0",
     "build/three.min.js", b'="128"'),
    ("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", "mathjax", "3.2.2",
     "es5/tex-mml-chtml.js", b'"3.2.2"'),
    ("https://cdn.jsdelivr.net/npm/three@0.128.0/examples/js/controls/OrbitControls.js",
     "three", "0.128.0", "examples/js/controls/OrbitControls.js", b"OrbitControls"),
    ("https://cdn.jsdelivr.net/npm/p5@1.4.1/lib/p5.js", "p5", "1.4.1", "lib/p5.js",
     b"p5.js v1.4.1"),
    ("https://cdnjs.cloudflare.com/ajax/libs/mathjs/11.5.0/math.js", "mathjs", "11.5.0",
     "lib/browser/math.js", b'"11.5.0"'),
    ("https://cdnjs.cloudflare.com/ajax/libs/numeric/1.2.6/numeric.min.js", "numeric",
     "1.2.6", "numeric-1.2.6.min.js", b'"1.2.6"'),
    ("https://cdn.plot.ly/plotly-2.14.0.min.js", "plotly.js-dist-min", "2.14.0",
     "plotly.min.js", b"plotly.js v2.14.0"),
    ("https://cdn.plot.ly/plotly-2.24.1.min.js", "plotly.js-dist-min", "2.24.1",
     "plotly.min.js", b"plotly.js v2.24.1"),
    ("https://cdn.plot.ly/plotly-2.26.0.min.js", "plotly.js-dist-min", "2.26.0",
     "plotly.min.js", b"plotly.js v2.26.0"),
    ("https://cdn.plot.ly/plotly-2.29.1.min.js", "plotly.js-dist-min", "2.29.1",
     "plotly.min.js", b"plotly.js v2.29.1"),
    ("https://cdn.jsdelivr.net/npm/three@0.150.1/build/three.min.js", "three", "0.150.1",
     "build/three.min.js", b'="150"'),
    ("https://unpkg.com/three@0.158.0/build/three.module.js", "three", "0.158.0",
     "build/three.module.js", b"REVISION = '158'"),
    ("https://unpkg.com/three@0.158.0/examples/jsm/controls/OrbitControls.js", "three",
     "0.158.0", "examples/jsm/controls/OrbitControls.js", b"from 'three'"),
    ("https://cdnjs.cloudflare.com/ajax/libs/mathjax/3.2.2/es5/tex-mml-chtml.min.js",
     "mathjax", "3.2.2", "es5/tex-mml-chtml.js", b'"3.2.2"'),
    ("https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=TeX-MML-AM_CHTML",
     "mathjax", "2.7.7", "MathJax.js", b"2.7.7"),
    ("https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/config/TeX-MML-AM_CHTML.js?V=2.7.7",
     "mathjax", "2.7.7", "config/TeX-MML-AM_CHTML.js", None),
    ("https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/jax/output/CommonHTML/fonts/TeX/"
     "fontdata.js?V=2.7.7", "mathjax", "2.7.7", "jax/output/CommonHTML/fonts/TeX/fontdata.js",
     None),
    ("https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/fonts/HTML-CSS/TeX/woff/"
     "MathJax_Main-Regular.woff?V=2.7.7", "mathjax", "2.7.7",
     "fonts/HTML-CSS/TeX/woff/MathJax_Main-Regular.woff", b"wOFF"),
    ("https://cdnjs.cloudflare.com/ajax/libs/plotly.js/2.8.3/plotly.min.js",
     "plotly.js-dist-min", "2.8.3", "plotly.min.js", b"plotly.js v2.8.3"),
    ("https://cdn.jsdelivr.net/npm/chart.js", "chart.js", "4.6.1", "dist/chart.umd.min.js",
     b"Chart.js v4.6.1"),
    ("https://cdn.jsdelivr.net/npm/chart.js@4.4.0/dist/chart.umd.min.js", "chart.js", "4.4.0",
     "dist/chart.umd.js", b"Chart.js v4.4.0"),
    ("https://cdnjs.cloudflare.com/ajax/libs/Chart.js/2.9.4/Chart.min.js", "chart.js",
     "2.9.4", "dist/Chart.min.js", b"2.9.4"),
    ("https://cdnjs.cloudflare.com/ajax/libs/d3/7.8.5/d3.min.js", "d3", "7.8.5",
     "dist/d3.min.js", b"7.8.5"),
    ("https://d3js.org/d3.v7.min.js", "d3", "7.9.0", "dist/d3.min.js", b"7.9.0"),
    ("https://d3js.org/d3.v3.min.js", "d3", "3.5.17", "d3.min.js", b"3.5.17"),
    ("https://unpkg.com/mathjs@11.5.0/lib/browser/math.js", "mathjs", "11.5.0",
     "lib/browser/math.js", b'"11.5.0"'),
    ("https://cdn.jsdelivr.net/npm/plotly.js-dist@2.26.0/plotly.js", "plotly.js-dist-min",
     "2.26.0", "plotly.min.js", b"plotly.js v2.26.0"),
    ("https://cdn.jsdelivr.net/npm/plotly.js@2.29.1/dist/plotly.min.js", "plotly.js-dist-min",
     "2.29.1", "plotly.min.js", b"plotly.js v2.29.1"),
    ("https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/output/chtml/fonts/woff-v2/"
     "MathJax_Main-Regular.woff", "mathjax", "3.2.2",
     "es5/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff", b"wOFF"),
]


@pytest.mark.parametrize("url,package,version,rel,marker", REAL_URLS,
                         ids=[u[0].split("//")[1][:70] for u in REAL_URLS])
def test_real_urls(mirror, url, package, version, rel, marker):
    hit = mirror.resolve(url)
    assert hit is not None, url
    assert (hit.package, hit.version, hit.fallback) == (package, version, False)
    assert hit.path.as_posix().endswith("/" + rel)
    assert hit.path.is_file()
    assert _served_version(hit) == version
    if marker is not None:
        assert marker in mirror.read(hit)[:4_000_000]


def test_content_types_and_headers(mirror):
    js = mirror.resolve("https://cdn.plot.ly/plotly-2.29.1.min.js")
    assert js.content_type == "application/javascript; charset=utf-8"
    woff = mirror.resolve("https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/output/chtml/"
                          "fonts/woff-v2/MathJax_Zero.woff")
    assert woff.content_type == "font/woff"
    assert response_headers(woff)["access-control-allow-origin"] == "*"
    assert cdn.content_type_for("a/b.woff2") == "font/woff2"
    assert cdn.content_type_for("x.css") == "text/css; charset=utf-8"
    assert cdn.content_type_for("x.map").startswith("application/json")
    assert cdn.content_type_for("x.wasm") == "application/wasm"


def test_requested_field(mirror):
    assert mirror.resolve("https://cdnjs.cloudflare.com/ajax/libs/three.js/r128/three.min.js"
                          ).requested == "r128"
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"
                          ).requested == "3"
    assert mirror.resolve("https://cdn.plot.ly/plotly-latest.min.js").requested is None
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/p5@latest/lib/p5.js").requested is None


def test_unversioned_is_highest(mirror):
    for url, package in [("https://cdn.jsdelivr.net/npm/p5", "p5"),
                         ("https://unpkg.com/three/build/three.module.js", "three"),
                         ("https://cdn.jsdelivr.net/npm/mathjs", "mathjs"),
                         ("https://cdn.jsdelivr.net/npm/d3@latest", "d3")]:
        hit = mirror.resolve(url)
        assert hit is not None and not hit.fallback, url
        assert hit.version == mirror.packages()[package][-1]
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/mathjs").path.as_posix().endswith(
        "lib/browser/math.js")


def test_partial_versions(mirror):
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/three@0.128/build/three.js"
                          ).version == "0.128.0"
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/p5@1.4/lib/p5.js").version == "1.4.2"
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/p5@1/lib/p5.js").version == "1.11.11"
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/d3@7").version == "7.9.0"
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/chart.js@4.4").version == "4.4.1"
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/mathjax@^3.1/es5/tex-chtml.js"
                          ).version == "3.2.2"
    assert mirror.resolve("https://cdn.jsdelivr.net/npm/p5@~1.4.0/lib/p5.js").version == "1.4.2"


def test_fallback_to_nearest(mirror):
    cases = [
        ("https://cdn.jsdelivr.net/npm/p5@1.3.1/lib/p5.js", "1.4.1"),  # nearest minor, patch
        ("https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.5.0/p5.min.js", "1.6.0"),  # tie: higher
        ("https://cdnjs.cloudflare.com/ajax/libs/three.js/r140/three.min.js", "0.150.1"),
        ("https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.5/MathJax.js", "2.7.7"),
        ("https://cdn.plot.ly/plotly-2.20.0.min.js", "2.24.1"),
        ("https://cdn.jsdelivr.net/npm/p5@2.0.0/lib/p5.min.js", "1.11.11"),  # nearest major
    ]
    for url, version in cases:
        hit = mirror.resolve(url)
        assert hit is not None, url
        assert (hit.version, hit.fallback) == (version, True), url
        assert _served_version(hit) == version


def test_misses(mirror):
    misses = [
        "https://cdn.jsdelivr.net/npm/p5@1.4.0/dist/p5.js",  # not in the npm package
        "https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.4.0/p5.nope.js",
        "https://cdn.jsdelivr.net/npm/three@0.150.1/examples/js/controls/OrbitControls.js",
        "https://cdn.jsdelivr.net/npm/three@0.128.0/build/",  # directory listing
        "https://cdn.jsdelivr.net/npm/three@0.128.0/build",
        "https://cdn.jsdelivr.net/npm/leftpad@1.0.0/index.js",  # library not mirrored
        "https://cdnjs.cloudflare.com/ajax/libs/jquery/3.6.0/jquery.min.js",
        "https://cdn.jsdelivr.net/npm/p5@not-a-version!/lib/p5.js",
        "https://cdn.jsdelivr.net/gh/processing/p5.js/lib/p5.js",
        "https://example.com/npm/p5@1.4.0/lib/p5.js",  # not a CDN
        "https://www.google-analytics.com/analytics.js",
        "http://app.rcca.local/index.html",
        "data:text/javascript,1",
        "file:///etc/passwd",
        "not a url",
    ]
    for url in misses:
        assert mirror.resolve(url) is None, url


def test_path_traversal(mirror):
    attacks = [
        "https://cdn.jsdelivr.net/npm/three@0.128.0/../../etc/passwd",
        "https://cdn.jsdelivr.net/npm/three@0.128.0/build/../../p5__1.4.0/lib/p5.js",
        "https://cdn.jsdelivr.net/npm/three@0.128.0/build/%2e%2e/%2e%2e/p5__1.4.0/package.json",
        "https://cdn.jsdelivr.net/npm/three@0.128.0/build/..%2f..%2f..%2f.rcca-cdn-stamp",
        "https://cdn.jsdelivr.net/npm/three@0.128.0/build/..%5c..%5cpackage.json",
        "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/../../../../etc/passwd",
        "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/%2fetc%2fpasswd",
        "https://unpkg.com/p5@1.4.0//etc/passwd",
        "https://unpkg.com/p5@1.4.0/./lib/p5.js",
        "https://unpkg.com/p5@1.4.0/lib/p5.js%00.png",
    ]
    for url in attacks:
        assert mirror.resolve(url) is None, url


def test_version_rules_are_semver_components(tmp_path):
    # A synthetic mirror: "1.4" must not match 1.40.0 by string prefix.
    for version in ("1.4.0", "1.40.0", "2.0.0-beta.1", "0.9.9"):
        d = tmp_path / "node_modules" / f"lib__{version}"
        (d / "dist").mkdir(parents=True)
        (d / "package.json").write_text(json.dumps(
            {"name": "lib", "version": version, "jsdelivr": "./dist/lib.min.js",
             "main": "dist/lib"}))
        (d / "dist" / "lib.min.js").write_text(f"/* {version} */")
        (d / "dist" / "lib.js").write_text(f"/* {version} */")
    (tmp_path / "node_modules" / "unpinned").mkdir()
    (tmp_path / "node_modules" / "unpinned" / "package.json").write_text(
        json.dumps({"name": "unpinned", "version": "1.0.0"}))
    m = CdnMirror(tmp_path)
    assert m.packages() == {"lib": ["0.9.9", "1.4.0", "1.40.0", "2.0.0-beta.1"]}

    def ver(spec):
        hit = m.resolve(f"https://cdn.jsdelivr.net/npm/lib@{spec}/dist/lib.js")
        return hit and (hit.version, hit.fallback)

    assert ver("1.4") == ("1.4.0", False)
    assert ver("1.40") == ("1.40.0", False)
    assert ver("1") == ("1.40.0", False)
    assert ver("1.x") == ("1.40.0", False)
    assert ver("^1.4.0") == ("1.40.0", False)
    assert ver("~1.4.0") == ("1.4.0", False)
    assert ver("^0.9.0") == ("0.9.9", False)
    assert ver(">=1.5.0") == ("1.40.0", False)
    assert ver("2.0.0-beta.1") == ("2.0.0-beta.1", False)  # exact prerelease only
    assert ver("latest") == ("1.40.0", False)  # prereleases are never "latest"
    assert ver("1.5") == ("1.4.0", True)
    assert ver("3") == ("1.40.0", True)
    assert ver("next") == ("1.40.0", True)
    assert m.resolve("https://cdn.jsdelivr.net/npm/unpinned@1.0.0/package.json") is None
    hit = m.resolve("https://cdn.jsdelivr.net/npm/lib@1.4.0")
    assert hit.path.name == "lib.min.js"
    hit = m.resolve("https://unpkg.com/lib@1.4.0")  # main without extension
    assert hit.path.name == "lib.js"


def test_read_cache_is_bounded(mirror):
    small = CdnMirror(default_root(), cache_bytes=6_000_000)
    a = small.resolve("https://cdn.plot.ly/plotly-2.29.1.min.js")
    b = small.resolve("https://cdn.plot.ly/plotly-2.26.0.min.js")
    data_a = small.read(a)
    assert small.read(a) is data_a  # served from the cache
    small.read(b)
    assert small._cached_bytes <= 6_000_000
    assert a.path not in small._cache  # least recently used went first
    assert small.read(a) == data_a


def test_missing_mirror_fails_loudly(tmp_path):
    with pytest.raises(FileNotFoundError):
        CdnMirror(tmp_path / "nothing")


def test_default_root(monkeypatch, tmp_path):
    monkeypatch.setenv("RCCA_CDN_DIR", str(tmp_path))
    assert default_root() == tmp_path
    monkeypatch.delenv("RCCA_CDN_DIR")
    assert default_root() == Path(cdn.__file__).resolve().parents[2] / ".cdn"


def test_install_is_idempotent(mirror):
    start = time.monotonic()
    install(default_root())
    assert time.monotonic() - start < 1.0


PAGE = """<!doctype html>
<html><head><meta charset="utf-8">
<script src="https://cdnjs.cloudflare.com/ajax/libs/p5.js/1.4.0/p5.min.js"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/three.js/r128/three.min.js"></script>
<script src="https://cdn.jsdelivr.net/npm/three@0.128.0/examples/js/controls/OrbitControls.js">
</script>
<script src="https://cdn.plot.ly/plotly-latest.min.js"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjs/11.5.0/math.js"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/numeric/1.2.6/numeric.min.js"></script>
<script src="https://www.google-analytics.com/analytics.js"></script>
<!-- After Plotly: plotly.js 1.x calls MathJax.Hub.Config (v2 API) on load
     when window.MathJax exists, as it does on the real CDN. -->
<script>window.MathJax = {tex: {inlineMath: [['$', '$']]}};</script>
<script id="MathJax-script" async
  src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>
<script type="module">
  import * as T from 'https://unpkg.com/three@0.158.0/build/three.module.js';
  window.moduleRevision = T.REVISION;
</script>
</head><body><p id="eq">Area: $x^2$</p><div id="plot" style="width:300px;height:200px"></div>
</body></html>"""

PROBE = """async () => {
  await MathJax.startup.promise;
  await Plotly.newPlot('plot', [{x: [1, 2, 3], y: [3, 1, 2]}]);
  return {
    p5: typeof p5, three: typeof THREE, threeRevision: THREE.REVISION,
    orbit: typeof THREE.OrbitControls, plotly: typeof Plotly, plotlyVersion: Plotly.version,
    math: typeof math, sum: math.evaluate('2 + 3'), numeric: typeof numeric,
    mathjaxVersion: MathJax.version,
    typeset: document.querySelectorAll('#eq mjx-container').length,
    plotted: document.querySelectorAll('#plot .main-svg').length > 0,
    moduleRevision: window.moduleRevision,
  };
}"""


def _run_page(mirror: CdnMirror, html: str, ready: str, probe: str):
    """Loads html as an app in the evaluator's own sandboxed browser (mirror on loopback).

    Returns:
        (probe result, CDN URLs served, URLs refused, page errors).
    """
    async def run():
        worker = await BrowserWorker(BrowserConfig(), mirror).start()
        served, errors = [], []
        try:
            async with worker.page(html) as (page, watch, _):
                page.on("requestfinished",
                        lambda r: served.append(r.url) if is_cdn_url(r.url) else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                await page.goto(APP_URL, wait_until="load")
                await page.wait_for_function(ready, timeout=30_000)
                result = await page.evaluate(probe)
                refused = [r["url"] for r in watch.requests if r["kind"] == "blocked_request"]
        finally:
            await worker.close()
        return result, served, refused, errors

    return asyncio.run(run())


needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium on this host")


@needs_chromium
def test_headless_chromium_offline(mirror):
    result, served, aborted, errors = _run_page(
        mirror, PAGE, "window.MathJax && MathJax.startup && window.moduleRevision", PROBE)
    assert result == {
        "p5": "function", "three": "object", "threeRevision": "128", "orbit": "function",
        "plotly": "object", "plotlyVersion": "1.58.5", "math": "object", "sum": 5,
        "numeric": "function", "mathjaxVersion": "3.2.2", "typeset": 1, "plotted": True,
        "moduleRevision": "158",
    }
    assert aborted == ["https://www.google-analytics.com/analytics.js"]
    assert errors == []
    assert any(u.endswith(".woff") for u in served), served  # MathJax fonts, via CORS


PAGE_MATHJAX2_MODULES = r"""<!doctype html>
<html><head><meta charset="utf-8">
<script async
  src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=TeX-MML-AM_CHTML">
</script>
<script type="importmap">{"imports": {
  "three": "https://unpkg.com/three@0.158.0/build/three.module.js",
  "three/addons/": "https://unpkg.com/three@0.158.0/examples/jsm/"}}</script>
<script type="module">
  import * as THREE from 'three';
  import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
  window.moduleResult = {revision: THREE.REVISION, orbit: typeof OrbitControls};
</script>
</head><body><p id="eq">Area: \(x^2\)</p></body></html>"""

PROBE_MATHJAX2 = """() => new Promise(resolve => MathJax.Hub.Queue(() => resolve({
  version: MathJax.version,
  typeset: document.querySelectorAll('#eq .mjx-chtml').length > 0,
  modules: window.moduleResult,
})))"""


@needs_chromium
def test_headless_chromium_mathjax2_and_import_map(mirror):
    # MathJax 2 pulls its config, jax and fonts relative to its own URL.
    result, served, aborted, errors = _run_page(
        mirror, PAGE_MATHJAX2_MODULES,
        "window.MathJax && MathJax.Hub && MathJax.isReady && window.moduleResult",
        PROBE_MATHJAX2)
    assert result == {"version": "2.7.7", "typeset": True,
                      "modules": {"revision": "158", "orbit": "function"}}
    assert aborted == [] and errors == []
    assert any("/mathjax/2.7.7/config/TeX-MML-AM_CHTML.js" in u for u in served), served
    assert any("/mathjax/2.7.7/jax/output/CommonHTML/" in u for u in served), served


SANDBOX_PAGE = """<!doctype html><html><head>
<script src="https://cdn.plot.ly/plotly-2.35.2.min.js"></script>
<script src="https://cdnjs.cloudflare.com/ajax/libs/p5.js/9.9.9/nothing-here.js"
        onerror="window.missing = 'network error'"></script>
</head><body><script>
async function attempt(url) {
  try { await fetch(url); return 'reached'; } catch (e) { return 'refused'; }
}
// The mirror's own port (the test writes it in), an IP literal, cloud metadata, another host.
window.sandbox = Promise.all([attempt('http://127.0.0.1:MIRROR_PORT/'), attempt('http://10.1.2.3/'),
                              attempt('http://169.254.169.254/'), attempt('https://example.com/')]);
</script></body></html>"""


@needs_chromium
def test_sandbox_serves_the_mirror_from_the_http_cache_and_refuses_the_rest(mirror):
    """A second load of a library in a context comes from the HTTP cache, not the mirror;
    a CDN file the mirror lacks, IP literals and other hosts are network errors, recorded."""
    async def run():
        worker = await BrowserWorker(BrowserConfig(pages_per_worker=1), mirror).start()
        try:
            seen = []
            html = SANDBOX_PAGE.replace("MIRROR_PORT", str(worker._server.port))
            for _ in range(2):
                async with worker.page(html) as (page, watch, _):
                    await page.goto(APP_URL, wait_until="load")
                    outcomes = await page.evaluate("window.sandbox")
                    missing = await page.evaluate("window.missing")
                    cached = await page.evaluate(
                        "performance.getEntriesByType('resource').filter(e => "
                        "e.name.includes('plotly')).map(e => e.transferSize)")
                    version = await page.evaluate("Plotly.version")
                    seen.append((outcomes, missing, cached, version,
                                 sorted(r["url"] for r in watch.requests
                                        if r["kind"] == "blocked_request")))
            return seen, worker.pages_served
        finally:
            await worker.close()

    (first, second), pages = asyncio.run(run())
    for outcomes, missing, _, version, refused in (first, second):
        assert outcomes == ["refused"] * 4
        assert missing == "network error" and version == "2.35.2"
        assert "https://cdnjs.cloudflare.com/ajax/libs/p5.js/9.9.9/nothing-here.js" in refused
        assert {"http://10.1.2.3/", "http://169.254.169.254/", "https://example.com/"} <= set(refused)
    assert first[2][0] > 0, "the first load must come from the mirror"
    assert second[2] == [0], "the second load in the same context must come from the cache"


def test_mirror_certificate_is_made_once_and_needs_openssl(tmp_path, monkeypatch):
    from evaluators.sandbox import app_server

    cert, key = app_server.ensure_certificate(tmp_path / "tls")
    assert cert.read_text().startswith("-----BEGIN CERTIFICATE-----")
    made = cert.stat().st_mtime_ns
    assert app_server.ensure_certificate(tmp_path / "tls") == (cert, key)
    assert cert.stat().st_mtime_ns == made
    monkeypatch.setattr(app_server.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install openssl"):
        app_server.ensure_certificate(tmp_path / "elsewhere")
