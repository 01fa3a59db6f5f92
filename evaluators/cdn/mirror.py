"""Offline CDN mirror: pinned npm copies of the libraries generated apps load.

Generated single-file apps pull p5, three, Plotly, MathJax, math.js, ... from
public CDNs. Evaluation has to be deterministic and offline, so at set-up time
``install`` puts pinned versions (``packages.json``) under one npm prefix,
each under an npm alias (``p5__1.4.0``) so that several versions coexist. At
evaluation time the browser's loopback server (``evaluators.sandbox.app_server``) asks
``CdnMirror.resolve`` which installed file a CDN URL stands for and serves
``CdnMirror.read``.

The URL layouts of cdnjs, jsDelivr, unpkg, cdn.plot.ly and d3js.org are mapped
onto the npm package layout. Version choice follows the CDNs (exact, partial, caret and
tilde ranges, "latest"); a request no installed version satisfies is served
from the nearest installed version and flagged ``fallback`` so the caller can
record it. Unversioned requests get the highest installed version. For p5 that
is the newest 1.x on purpose: p5 2.x drops APIs (``preload``) that sketches
written for 1.x rely on, and answers that omit the version were written for 1.x.

URL parsing and version choice live in ``evaluators.cdn.urls``, installation
in ``evaluators.cdn.install``; this module serves the mirror (``CdnMirror``),
re-exports the public names and is the CLI.

CLI::

    python -m evaluators.cdn install [--root DIR] [--manifest FILE]
    python -m evaluators.cdn resolve URL [--root DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
import threading
from pathlib import Path
from typing import Optional

from evaluators.cdn.install import (
    _ALIAS_SEP, MANIFEST_PATH, default_root, install, load_manifest,
)
from evaluators.cdn.urls import (
    PLOTLY_LATEST,  # noqa: F401  (re-exported)
    _Installed, _min_variants, _nearest, _parse_exact, _parse_url, _safe_file, _spec_predicate,
    _TAG_RE, MirrorHit,
)

__all__ = ["MANIFEST_PATH", "CdnMirror", "MirrorHit", "content_type_for", "default_root",
           "install", "load_manifest", "response_headers"]

DEFAULT_CACHE_BYTES = 256 << 20

_JS, _JSON, _TEXT = ("application/javascript; charset=utf-8", "application/json; charset=utf-8",
                     "text/plain; charset=utf-8")
_CONTENT_TYPES = {
    ".js": _JS, ".mjs": _JS, ".cjs": _JS, ".json": _JSON, ".map": _JSON, ".txt": _TEXT,
    ".md": _TEXT, ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8",
    ".woff": "font/woff", ".woff2": "font/woff2", ".otf": "font/otf", ".ttf": "font/ttf",
    ".eot": "application/vnd.ms-fontobject", ".svg": "image/svg+xml", ".png": "image/png",
    ".gif": "image/gif", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".wasm": "application/wasm",
}


def content_type_for(path: str | Path) -> str:
    """Returns the Content-Type the CDNs send for a file, by its extension."""
    return _CONTENT_TYPES.get(Path(path).suffix.lower(), "application/octet-stream")



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
    CDNs send it. So do they send timing-allow-origin (resource timing shows
    the page whether a file came from the cache) and a long-lived cache-control.
    """
    return {
        "content-type": hit.content_type,
        "access-control-allow-origin": "*",
        "timing-allow-origin": "*",
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
        from evaluators.sandbox.app_server import ensure_certificate  # local: app_server imports us

        install(root, args.manifest)
        ensure_certificate(root / "tls")  # once here, not raced by workers starting together
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
