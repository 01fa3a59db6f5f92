"""CDN URLs -> npm package, version and file, for the offline mirror (``evaluators.cdn``).

Holds the version logic (exact versions, the partial, caret and tilde ranges
the CDNs accept, and the nearest installed version for a request none
satisfies) and the URL layouts of cdnjs, jsDelivr, unpkg, cdn.plot.ly and
d3js.org mapped onto the npm package layout (``_parse_url``), with
``MirrorHit``, one URL mapped onto an installed file, and the safe join of a
URL path onto a package directory.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Callable, Iterator, Optional
from urllib.parse import unquote, urlsplit

# plotly-latest.min.js on cdn.plot.ly was frozen at this release when v2 shipped.
PLOTLY_LATEST = "1.58.5"


# ---- Versions ----------------------------------------------------------

# (major, minor, patch, is_release, prerelease): releases sort after their
# prereleases, as in semver.
_Key = tuple[int, int, int, int, str]
_EXACT_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?")
_SPEC_RE = re.compile(
    r"(\^|~|>=|<=|>|<)?(\d+)(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:-([0-9A-Za-z.-]+))?"
)
_TAG_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def _parse_exact(text: str) -> Optional[_Key]:
    m = _EXACT_RE.fullmatch(text.strip())
    if not m:
        return None
    pre = m.group(4) or ""
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), 0 if pre else 1, pre)


def _num(part: Optional[str]) -> Optional[int]:
    return int(part) if part is not None and part.isdigit() else None


def _spec_predicate(
    spec: str, package: str
) -> Optional[tuple[Callable[[_Key], bool], tuple[int, int, int]]]:
    """Parses a CDN version text into (predicate over keys, fallback target).

    Returns None for text that is no version at all (the CDN would 404).
    """
    s = spec.strip().lstrip("=").strip()
    if package == "three" and re.fullmatch(r"[rR]\d+", s):
        s = "0." + s[1:]  # cdnjs names three.js releases r128 for 0.128.x
    if s[:1] in "vV":
        s = s[1:]
    m = _SPEC_RE.fullmatch(s)
    if not m:
        return None
    op, major = m.group(1) or "", int(m.group(2))
    minor, patch, pre = _num(m.group(3)), _num(m.group(4)), m.group(5) or ""
    if m.group(3) is not None and minor is None:
        patch = None  # "1.x.3" reads as "1.x"
    target = (major, minor or 0, patch or 0)
    if not op and minor is not None and patch is not None:
        exact = (major, minor, patch, 0 if pre else 1, pre)
        return (lambda k: k == exact), target
    if not op:
        given = [c for c in (major, minor, patch) if c is not None]
        return (lambda k: k[3] == 1 and list(k[: len(given)]) == given), target
    low = target
    if op == "^":
        if major > 0 or minor is None:
            high = (major + 1, 0, 0)
        elif minor > 0 or patch is None:
            high = (0, minor + 1, 0)
        else:
            high = (0, 0, patch + 1)
    elif op == "~":
        high = (major, minor + 1, 0) if minor is not None else (major + 1, 0, 0)
    else:
        tests = {">=": lambda v: v >= low, ">": lambda v: v > low,
                 "<=": lambda v: v <= low, "<": lambda v: v < low}[op]
        return (lambda k: k[3] == 1 and tests(k[:3])), target
    return (lambda k: k[3] == 1 and low <= k[:3] < high), target


def _nearest(keys: list[_Key], target: tuple[int, int, int]) -> _Key:
    """Picks the installed version closest to ``target``, same major first."""
    releases = [k for k in keys if k[3] == 1] or list(keys)
    same = [k for k in releases if k[0] == target[0]]
    if same:
        # Ties go to the higher version: it carries the later bug fixes.
        return min(same, key=lambda k: (abs(k[1] - target[1]), abs(k[2] - target[2]), -k[1], -k[2]))
    major = min({k[0] for k in releases}, key=lambda m: (abs(m - target[0]), -m))
    in_major = [k for k in releases if k[0] == major]
    # Below the request the newest of that major is closest, above it the oldest.
    return max(in_major) if major < target[0] else min(in_major)


# ---- URL layouts -------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MirrorHit:
    """One CDN URL mapped onto an installed file.

    Attributes:
        url: The requested URL, verbatim.
        package: The npm package served (e.g. "plotly.js-dist-min").
        requested: Version text in the URL ("r128", "3", "1.4.0"), None when
            the URL names none or says "latest".
        version: The installed version served.
        fallback: True when no installed version satisfies the request and
            the nearest one was served instead.
        path: The file on disk.
        content_type: Content-Type header value for the response.
    """

    url: str
    package: str
    requested: Optional[str]
    version: str
    fallback: bool
    path: Path
    content_type: str


@dataclasses.dataclass(frozen=True)
class _Installed:
    name: str
    version: str
    key: _Key
    directory: Path
    meta: dict


# Maps an installed package version to the candidate files, in order.
_FileFn = Callable[[_Installed], list[str]]
_Renames = tuple[tuple[str, str], ...]  # (regex on the whole file path, replacement)


@dataclasses.dataclass(frozen=True)
class _Request:
    package: str
    requested: Optional[str]  # what the URL said, for the record
    spec: Optional[str]  # what to match; differs from requested for aliases
    files: _FileFn


@dataclasses.dataclass(frozen=True)
class _CdnjsLib:
    package: str
    templates: tuple[str, ...]  # "{f}": file path from the URL, "{v}": version
    renames: _Renames = ()


# Plotly's partial bundles; each is a subset of the full bundle.
_PLOTLY_PARTIAL = r"(?:-(?:basic|cartesian|geo|gl2d|gl3d|mapbox|finance|strict))?"
_PLOTLY_BUNDLE = r"plotly" + _PLOTLY_PARTIAL + r"(?:\.min)?\.js"

# cdnjs flattens each library's npm build directory into the version folder.
_CDNJS = {
    "p5.js": _CdnjsLib("p5", ("lib/{f}", "{f}")),
    "p5": _CdnjsLib("p5", ("lib/{f}", "{f}")),
    "three.js": _CdnjsLib("three", ("build/{f}", "{f}")),
    "mathjax": _CdnjsLib("mathjax", ("{f}",)),
    "mathjs": _CdnjsLib("mathjs", ("lib/browser/{f}", "dist/{f}", "{f}")),
    "numeric": _CdnjsLib("numeric", ("{f}",), ((r"numeric((?:\.min)?\.js)", r"numeric-{v}\1"),)),
    # Partial bundles are subsets of the full one, so the full one stands in.
    "plotly.js": _CdnjsLib("plotly.js-dist-min", ("{f}",), ((_PLOTLY_BUNDLE, "plotly.min.js"),)),
    "chart.js": _CdnjsLib("chart.js", ("dist/{f}", "{f}")),
    "d3": _CdnjsLib("d3", ("dist/{f}", "{f}")),
}

# npm names that resolve to an installed package with a different layout.
# Each: (installed package, renames of URL files, file for a bare package URL).
_NPM_ALIASES: dict[str, tuple[str, _Renames, str]] = {
    "plotly.js-dist": ("plotly.js-dist-min", ((_PLOTLY_BUNDLE, "plotly.min.js"),), "plotly.min.js"),
    "plotly.js": ("plotly.js-dist-min", (("dist/" + _PLOTLY_BUNDLE, "plotly.min.js"),),
                  "plotly.min.js"),
}

_JSDELIVR_HOSTS = {"cdn.jsdelivr.net", "fastly.jsdelivr.net", "gcore.jsdelivr.net",
                   "testingcf.jsdelivr.net", "quantum.jsdelivr.net", "originfastly.jsdelivr.net"}
_UNPKG_HOSTS = {"unpkg.com", "www.unpkg.com"}
# Every host name `_parse_url` maps onto the mirror (the browser sends exactly these to it).
CDN_HOSTS = frozenset(_JSDELIVR_HOSTS | _UNPKG_HOSTS | {
    "cdnjs.cloudflare.com", "cdn.plot.ly", "d3js.org", "www.d3js.org"})
_PLOTLY_CDN_RE = re.compile(
    r"/plotly" + _PLOTLY_PARTIAL + r"-(latest|v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)(?:\.min)?\.js")


def _apply_renames(path: str, renames: _Renames, version: str) -> str:
    for pattern, repl in renames:
        if re.fullmatch(pattern, path):
            return re.sub(pattern, repl.replace("{v}", version), path)
    return path


def _entry_files(inst: _Installed, fields: tuple[str, ...]) -> list[str]:
    """Resolves a package's browser entry point the way the CDN does."""
    entry = None
    for field in fields:
        value = inst.meta.get(field)
        if isinstance(value, str) and value.strip():
            entry = value.strip()
            break
    entry = re.sub(r"^(\./)+", "", entry or "index.js").rstrip("/") or "index.js"
    # "main" may omit the extension or name a folder, as Node allows.
    return [entry, entry + ".js", entry + "/index.js"]


def _split_npm_path(path: str) -> Optional[tuple[str, Optional[str], Optional[str]]]:
    """Splits "<pkg>[@<ver>][/<file>]" (scoped names allowed)."""
    segs = path.split("/")
    n = 2 if segs[0].startswith("@") else 1
    if len(segs) < n or not segs[n - 1]:
        return None
    head = "/".join(segs[:n])
    rest = "/".join(segs[n:])
    at = head.find("@", 1)
    name, ver = (head[:at], head[at + 1:]) if at > 0 else (head, None)
    if len(segs) > n and not rest:
        rest = "/"  # a trailing slash asks for a directory listing: not served
    return name.lower(), (ver or None), (rest or None)


def _npm_request(path: str, fields: tuple[str, ...]) -> Optional[_Request]:
    parts = _split_npm_path(path)
    if parts is None:
        return None
    name, ver, file = parts
    renames: _Renames = ()
    bare: Optional[str] = None
    if name in _NPM_ALIASES:
        name, renames, bare = _NPM_ALIASES[name]
    requested = None if ver is None or ver.lower() == "latest" else ver

    def files(inst: _Installed) -> list[str]:
        if file is None:
            return [bare] if bare else _entry_files(inst, fields)
        return [_apply_renames(file, renames, inst.version)]

    return _Request(name, requested, requested, files)


def _cdnjs_request(path: str) -> Optional[_Request]:
    m = re.fullmatch(r"/ajax/libs/([^/]+)/([^/]+)/(.+)", path)
    if not m:
        return None
    lib = _CDNJS.get(m.group(1).lower())
    if lib is None:
        return None
    ver, file = m.group(2), m.group(3)

    def files(inst: _Installed) -> list[str]:
        f = _apply_renames(file, lib.renames, inst.version)
        return [t.replace("{f}", f).replace("{v}", inst.version) for t in lib.templates]

    return _Request(lib.package, ver, ver, files)


def _plotly_cdn_request(path: str) -> Optional[_Request]:
    m = _PLOTLY_CDN_RE.fullmatch(path)
    if not m:
        return None
    ver = None if m.group(1) == "latest" else m.group(1)
    return _Request("plotly.js-dist-min", ver, ver or PLOTLY_LATEST, lambda _: ["plotly.min.js"])


def _d3js_request(path: str) -> Optional[_Request]:
    # d3js.org serves the newest release of a major as /d3.v<major>[.min].js.
    m = re.fullmatch(r"/d3\.v(\d+)((?:\.min)?\.js)", path)
    if not m:
        return None
    major, file = m.group(1), "d3" + m.group(2)
    return _Request("d3", major, major, lambda _: ["dist/" + file, file])


def _parse_url(url: str) -> Optional[_Request]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https"):
        return None
    host = (parts.hostname or "").lower()
    path = unquote(parts.path)
    if host == "cdnjs.cloudflare.com":
        return _cdnjs_request(path)
    if host in _JSDELIVR_HOSTS and path.startswith("/npm/"):  # not /gh/ nor /combine/
        return _npm_request(path[5:], ("jsdelivr", "browser", "main"))
    if host in _UNPKG_HOSTS:
        return _npm_request(path[1:], ("unpkg", "browser", "main"))
    if host == "cdn.plot.ly":
        return _plotly_cdn_request(path)
    if host in ("d3js.org", "www.d3js.org"):
        return _d3js_request(path)
    return None


def _min_variants(rel: str) -> Iterator[str]:
    """Yields a file and, for a missing .min name, the unminified name."""
    yield rel
    for ext in (".min.js", ".min.css", ".min.mjs"):
        if rel.endswith(ext):
            yield rel[: -len(ext)] + ext[4:]


def _safe_file(directory: Path, rel: str) -> Optional[Path]:
    """Joins a URL-relative path to a package dir, refusing to escape it."""
    if not rel or "\\" in rel or "\x00" in rel or rel.endswith("/") or rel.startswith("/"):
        return None
    segs = rel.split("/")
    if any(s in ("", ".", "..") for s in segs):
        return None
    candidate = directory.joinpath(*segs)
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not real.is_relative_to(directory.resolve()) or not real.is_file():
        return None
    return candidate

