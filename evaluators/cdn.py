"""Offline CDN mirror: pinned npm copies of the libraries generated apps load.

Generated single-file apps pull p5, three, Plotly, MathJax, math.js, ... from
public CDNs. Evaluation has to be deterministic and offline, so at set-up time
``install`` puts pinned versions (``cdn_packages.json``) under one npm prefix,
each under an npm alias (``p5__1.4.0``) so that several versions coexist. At
evaluation time the browser's request interceptor asks ``CdnMirror.resolve``
which installed file a CDN URL stands for and serves ``CdnMirror.read``.

The URL layouts of cdnjs, jsDelivr, unpkg, cdn.plot.ly and d3js.org are mapped
onto the npm package layout. Version choice follows the CDNs (exact, partial, caret and
tilde ranges, "latest"); a request no installed version satisfies is served
from the nearest installed version and flagged ``fallback`` so the caller can
record it. Unversioned requests get the highest installed version. For p5 that
is the newest 1.x on purpose: p5 2.x drops APIs (``preload``) that sketches
written for 1.x rely on, and answers that omit the version were written for 1.x.

CLI::

    python -m evaluators.cdn install [--root DIR] [--manifest FILE]
    python -m evaluators.cdn resolve URL [--root DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator, Optional
from urllib.parse import unquote, urlsplit

__all__ = ["MANIFEST_PATH", "CdnMirror", "MirrorHit", "content_type_for", "default_root",
           "install", "load_manifest", "response_headers"]

MANIFEST_PATH = Path(__file__).with_name("cdn_packages.json")
_STAMP_NAME = ".rcca-cdn-stamp"
_LOCK_NAME = ".rcca-cdn-lock"
_ALIAS_SEP = "__"
_NPM_TIMEOUT_S = 3600
DEFAULT_CACHE_BYTES = 256 << 20

# plotly-latest.min.js on cdn.plot.ly was frozen at this release when v2 shipped.
PLOTLY_LATEST = "1.58.5"

_JS, _JSON, _TEXT = ("application/javascript; charset=utf-8", "application/json; charset=utf-8",
                     "text/plain; charset=utf-8")
_CONTENT_TYPES = {
    ".js": _JS, ".mjs": _JS, ".cjs": _JS, ".json": _JSON, ".map": _JSON, ".txt": _TEXT,
    ".md": _TEXT, ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8",
    ".woff": "font/woff", ".woff2": "font/woff2", ".otf": "font/otf", ".ttf": "font/ttf",
    ".eot": "application/vnd.ms-fontobject", ".svg": "image/svg+xml", ".png": "image/png",
    ".gif": "image/gif", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".wasm": "application/wasm",
}


def default_root() -> Path:
    """Returns where the mirror lives: ``$RCCA_CDN_DIR`` or ``<repo>/.cdn``."""
    env = os.environ.get("RCCA_CDN_DIR")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parent.parent / ".cdn"


def content_type_for(path: str | Path) -> str:
    """Returns the Content-Type the CDNs send for a file, by its extension."""
    return _CONTENT_TYPES.get(Path(path).suffix.lower(), "application/octet-stream")


# ---- Installation ------------------------------------------------------

def load_manifest(manifest: Path = MANIFEST_PATH) -> dict[str, list[str]]:
    """Reads the pinned manifest: npm package name -> exact versions, sorted.

    Raises:
        ValueError: If an entry is not an exact version.
    """
    raw = json.loads(Path(manifest).read_text(encoding="utf-8"))
    out: dict[str, list[str]] = {}
    for name, versions in sorted(raw.items()):
        for v in versions:
            if _parse_exact(v) is None:
                raise ValueError(f"{manifest}: {name}: {v!r} is not an exact version")
        out[name] = sorted(set(versions), key=lambda v: _parse_exact(v))
    return out


def _alias(name: str, version: str) -> str:
    # npm alias names cannot hold '@' or '/', so scoped names are flattened.
    return name.lstrip("@").replace("/", "--") + _ALIAS_SEP + version


def _is_current(root: Path, manifest: dict[str, list[str]], digest: str) -> bool:
    """True when the stamp matches and every pinned alias is in place."""
    try:
        if (root / _STAMP_NAME).read_text(encoding="utf-8").strip() != digest:
            return False
    except OSError:
        return False
    for name, versions in manifest.items():
        for version in versions:
            pj = root / "node_modules" / _alias(name, version) / "package.json"
            try:
                meta = json.loads(pj.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return False
            if meta.get("name") != name or meta.get("version") != version:
                return False
    return True


def install(root: Optional[Path] = None, manifest: Path = MANIFEST_PATH) -> None:
    """Installs every pinned package version under ``root`` (idempotent).

    A stamp file holding the manifest's hash makes a repeat call with nothing
    changed return at once. All aliases go into a single ``npm install`` call
    because npm prunes packages it was not asked for in the same prefix.

    Args:
        root: The mirror directory; ``default_root()`` when None.
        manifest: The pinned manifest file.

    Raises:
        RuntimeError: If npm is missing or fails, or the result is incomplete.
    """
    root = Path(root) if root is not None else default_root()
    pinned = load_manifest(manifest)
    digest = hashlib.sha256(json.dumps(pinned, sort_keys=True).encode()).hexdigest()
    if _is_current(root, pinned, digest):
        return
    root.mkdir(parents=True, exist_ok=True)
    # Serialises concurrent installers (parallel test workers, several hosts
    # sharing one directory); the loser re-checks the stamp after the winner.
    with open(root / _LOCK_NAME, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_current(root, pinned, digest):
            return
        stamp = root / _STAMP_NAME
        stamp.unlink(missing_ok=True)  # a failed install must not look done
        _run_npm(root, pinned)
        stamp.write_text(digest + "\n", encoding="utf-8")
        if not _is_current(root, pinned, digest):
            stamp.unlink()
            raise RuntimeError(f"npm finished but {root} lacks pinned packages")


def _run_npm(root: Path, pinned: dict[str, list[str]]) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found on PATH; it is needed to install the CDN mirror")
    specs = [f"{_alias(n, v)}@npm:{n}@{v}" for n, vs in pinned.items() for v in vs]
    cmd = [
        npm, "install", "--prefix", str(root), "--no-save", "--ignore-scripts",
        "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", *specs,
    ]
    env = dict(os.environ, npm_config_update_notifier="false")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=_NPM_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-4000:]
        raise RuntimeError(f"npm install failed ({proc.returncode}):\n{tail}")


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


# ---- Mirror ------------------------------------------------------------

class CdnMirror:
    """Maps CDN URLs onto the installed pinned packages and serves them.

    Thread-safe: ``resolve`` only reads the index and ``read`` locks its cache.

    Args:
        root: The directory ``install`` filled; ``default_root()`` when None.
        cache_bytes: Upper bound on the bytes ``read`` keeps in memory.

    Raises:
        FileNotFoundError: If ``root`` holds no installed packages, so that a
            missing set-up step fails loudly instead of aborting every library.
    """

    def __init__(self, root: Optional[Path] = None, cache_bytes: int = DEFAULT_CACHE_BYTES):
        self.root = Path(root) if root is not None else default_root()
        self.cache_bytes = cache_bytes
        self._packages = self._index(self.root / "node_modules")
        if not self._packages:
            raise FileNotFoundError(
                f"no CDN mirror under {self.root}; run `python -m evaluators.cdn install`")
        self._cache: collections.OrderedDict[Path, bytes] = collections.OrderedDict()
        self._cached_bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _index(modules: Path) -> dict[str, list[_Installed]]:
        found: dict[str, list[_Installed]] = {}
        if not modules.is_dir():
            return found
        for d in sorted(modules.iterdir()):
            # Only our aliases: dependencies npm hoisted beside them are not
            # pinned, so serving them would make results depend on install day.
            if _ALIAS_SEP not in d.name or not (d / "package.json").is_file():
                continue
            try:
                meta = json.loads((d / "package.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            key = _parse_exact(str(meta.get("version", "")))
            if key is None or not isinstance(meta.get("name"), str):
                continue
            found.setdefault(meta["name"], []).append(
                _Installed(meta["name"], meta["version"], key, d, meta))
        for versions in found.values():
            versions.sort(key=lambda i: i.key)
        return found

    def packages(self) -> dict[str, list[str]]:
        """Returns the installed package names and versions, ascending."""
        return {n: [i.version for i in vs] for n, vs in sorted(self._packages.items())}

    def _choose(self, package: str, spec: Optional[str]) -> Optional[tuple[_Installed, bool]]:
        """Picks the installed version for a version text; (choice, fallback)."""
        installed = self._packages.get(package)
        if not installed:
            return None
        releases = [i for i in installed if i.key[3] == 1] or installed
        if spec is None or spec.strip().lower() in ("", "latest"):
            return releases[-1], False
        parsed = _spec_predicate(spec, package)
        if parsed is None:
            # A dist-tag ("next", "beta") names some release: serve the newest.
            return (releases[-1], True) if _TAG_RE.fullmatch(spec.strip()) else None
        predicate, target = parsed
        matching = [i for i in installed if predicate(i.key)]
        if matching:
            return matching[-1], False
        near = _nearest([i.key for i in installed], target)
        return next(i for i in installed if i.key == near), True

    def resolve(self, url: str) -> Optional[MirrorHit]:
        """Maps a CDN URL to an installed file.

        Args:
            url: The request URL; query and fragment are ignored.

        Returns:
            The hit, or None for an unknown host or library, a version text
            that is no version, or a file the chosen version lacks (the real
            CDN would 404 too); the caller aborts such requests.
        """
        request = _parse_url(url)
        if request is None:
            return None
        chosen = self._choose(request.package, request.spec)
        if chosen is None:
            return None
        inst, fallback = chosen
        for rel in request.files(inst):
            for variant in _min_variants(rel):
                path = _safe_file(inst.directory, variant)
                if path is not None:
                    return MirrorHit(url=url, package=inst.name, requested=request.requested,
                                     version=inst.version, fallback=fallback, path=path,
                                     content_type=content_type_for(path))
        return None

    def read(self, hit: MirrorHit) -> bytes:
        """Returns a hit's bytes, from a size-bounded LRU cache when possible."""
        with self._lock:
            data = self._cache.get(hit.path)
            if data is not None:
                self._cache.move_to_end(hit.path)
                return data
        data = hit.path.read_bytes()
        if len(data) > self.cache_bytes:
            return data
        with self._lock:
            if hit.path not in self._cache:
                self._cache[hit.path] = data
                self._cached_bytes += len(data)
            while self._cached_bytes > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= len(old)
        return data


def response_headers(hit: MirrorHit) -> dict[str, str]:
    """Returns the headers to fulfil a hit with.

    The CORS header matters: module scripts and web fonts (MathJax's woff
    files) loaded from another origin are blocked without it, as the real
    CDNs send it.
    """
    return {
        "content-type": hit.content_type,
        "access-control-allow-origin": "*",
        "cache-control": "public, max-age=31536000, immutable",
    }


# ---- CLI ---------------------------------------------------------------

def _main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluators.cdn",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="install the pinned CDN packages")
    p_install.add_argument("--root", type=Path, default=None, help="mirror directory")
    p_install.add_argument("--manifest", type=Path, default=MANIFEST_PATH)
    p_resolve = sub.add_parser("resolve", help="show what a CDN URL maps to")
    p_resolve.add_argument("url")
    p_resolve.add_argument("--root", type=Path, default=None)
    args = parser.parse_args(argv)
    root = args.root if args.root is not None else default_root()
    if args.command == "install":
        install(root, args.manifest)
        print(f"CDN mirror ready at {root}")
        return 0
    hit = CdnMirror(root).resolve(args.url)
    if hit is None:
        print("not served (the request would be aborted)")
        return 1
    print(json.dumps({**dataclasses.asdict(hit), "path": str(hit.path)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
