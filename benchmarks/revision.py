"""Which code a benchmark's saved results came from, for runs made in parts."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def code_version(repo: Path = REPO) -> str:
    """HEAD's short hash; with tracked files changed, ``-dirty-`` and a hash of the change.

    Two dirty trees get the same name only when they hold the same change, so a pass saved
    from one set of uncommitted edits is not taken for another's.
    """
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *a], capture_output=True,
                              text=True).stdout

    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    diff = git("diff", "HEAD")
    return head + (f"-dirty-{hashlib.sha256(diff.encode()).hexdigest()[:8]}" if diff else "")


def tree_version(*paths: str, repo: Path = REPO) -> str:
    """A name for the tracked content of `paths` (HEAD's git object ids, and any uncommitted
    change to them): equal across commits that leave those paths alone.

    A pass saved by a benchmark whose result depends only on `paths` (the evaluator code, not
    the README or the benchmark's report) stays valid across such commits. Untracked files are
    not part of the name.
    """
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *a], capture_output=True,
                              text=True).stdout

    ids = git("rev-parse", *(f"HEAD:{p}" for p in paths))
    diff = git("diff", "HEAD", "--", *paths)
    return hashlib.sha256((ids + diff).encode()).hexdigest()[:12]
