"""Installation of the offline CDN mirror (``evaluators.cdn``).

Holds where the mirror lives (``default_root``), the pinned manifest
(``packages.json``, read by ``load_manifest``) and ``install``, which puts
every pinned version under one npm prefix, each under an npm alias
(``p5__1.4.0``) so that several versions coexist, and stamps the result so a
repeat call with nothing changed returns at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from evaluators.cdn.urls import _parse_exact

MANIFEST_PATH = Path(__file__).with_name("packages.json")
_STAMP_NAME = ".rcca-cdn-stamp"
_LOCK_NAME = ".rcca-cdn-lock"
_ALIAS_SEP = "__"
_NPM_TIMEOUT_S = 3600


def default_root() -> Path:
    """Returns where the mirror lives: ``$RCCA_CDN_DIR`` or ``<repo>/.cdn``."""
    env = os.environ.get("RCCA_CDN_DIR")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / ".cdn"


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

