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
