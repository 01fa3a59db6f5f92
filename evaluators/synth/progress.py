"""A synthesis run's journal: what each chunk of drafts decided, so a long run can stop and go on.

Validating thousands of drafts takes hours on a small machine, and a run that dies must not
lose what it decided. `Journal` appends, after each chunk, one line per decision to
``<out>.progress.jsonl``:

- ``{"kind": "start", "settings": {...}}``: once, first: what decides the drafts and their
  verdicts (seed, offline or model, validation settings). A run resumed with other settings is
  refused, naming the first that differs.
- ``{"kind": "seen", "id", "request"}``: a draft that passed screening (near-duplicates are
  checked against every such request, kept or not).
- ``{"kind": "task", "task", "reference"}``, ``{"kind": "drop", ...}``, ``{"kind":
  "judge_only", ...}``: `validate.Outcome`'s entries.
- ``{"kind": "chunk", "drafts": n, "seconds": s}``: the chunk is complete. Lines after the last
  such marker (a chunk cut off by a crash) are ignored on resume, and that chunk is drafted and
  validated again.

Drafts are taken in order (the offline generator is deterministic; a model is asked for the
next cells of its taxonomy), so a resumed run goes on from the number of drafts the complete
chunks made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evaluators.synth.validate import Outcome


class JournalError(ValueError):
    """A journal that cannot be continued (other settings, or unreadable), with its file."""


def journal_path(out: str) -> Path:
    """Where the journal of a run writing tasks to `out` lives."""
    return Path(out).with_suffix(".progress.jsonl")


class Journal:
    """The journal of one run (see the module's notes).

    Args:
      path: the journal file.
      settings: what decides the drafts and verdicts (JSON values).
      resume: go on from an existing journal; without it an existing journal is an error
        (it is never overwritten: the work it holds would be lost).

    Attributes:
      outcome: everything the complete chunks decided.
      seen: (request, id) of every draft that passed screening, in order.
      made: drafts the complete chunks made.
      seconds: time the complete chunks took, over every run.
    """

    def __init__(self, path: Path, settings: dict, resume: bool):
        self.path = Path(path)
        self.outcome, self.seen, self.made, self.seconds = Outcome(), [], 0, 0.0
        settings = json.loads(json.dumps(settings))  # as the journal holds them (lists, str keys)
        if self.path.exists() and not resume:
            raise JournalError(f"{self.path} exists: pass --resume to go on with that run, or "
                               "delete it to start again")
        if self.path.exists():
            self._replay(settings)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._append([{"kind": "start", "settings": settings}])

    def _replay(self, settings: dict) -> None:
        pending: list[dict] = []
        with self.path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                    kind = entry["kind"]
                except (ValueError, KeyError, TypeError) as e:
                    pending = []  # a line cut off by a crash ends the last, incomplete chunk
                    if line.endswith("\n"):
                        raise JournalError(f"{self.path}:{n}: unreadable journal line "
                                           f"({e})") from None
                    continue
                if kind == "start":
                    _same(self.path, entry.get("settings"), settings)
                elif kind == "chunk":
                    self._apply(pending)
                    self.made += int(entry["drafts"])
                    self.seconds += float(entry["seconds"])
                    pending = []
                else:
                    pending.append(entry)

    def _apply(self, entries: list[dict]) -> None:
        out = self.outcome
        for e in entries:
            if e["kind"] == "seen":
                self.seen.append((e["request"], e["id"]))
            elif e["kind"] == "task":
                out.tasks.append(e["task"])
                out.references.append(e["reference"])
            elif e["kind"] == "drop":
                out.dropped.append(e["entry"])
            elif e["kind"] == "judge_only":
                out.judge_only.append(e["entry"])

    def record(self, chunk: Outcome, seen: list[tuple[str, str]], drafts: int,
               seconds: float) -> None:
        """Appends one complete chunk (its outcome, the drafts it screened in, the drafts it
        made) and adds it to `outcome`, `seen`, `made` and `seconds`."""
        entries = [{"kind": "seen", "id": i, "request": r} for r, i in seen]
        entries += [{"kind": "task", "task": t, "reference": r}
                    for t, r in zip(chunk.tasks, chunk.references)]
        entries += [{"kind": "drop", "entry": d} for d in chunk.dropped]
        entries += [{"kind": "judge_only", "entry": j} for j in chunk.judge_only]
        self._append([*entries, {"kind": "chunk", "drafts": drafts,
                                 "seconds": round(seconds, 3)}])
        self._apply(entries)
        self.made += drafts
        self.seconds += seconds

    def _append(self, entries: list[dict]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries))
            f.flush()
            os.fsync(f.fileno())


def _same(path: Path, had, want: dict) -> None:
    """Raises JournalError naming the first setting a resumed run changes."""
    had = had if isinstance(had, dict) else {}
    for key in sorted(set(had) | set(want)):
        if had.get(key) != want.get(key):
            raise JournalError(f"{path}: the run was started with {key}={had.get(key)!r}, this "
                               f"one has {key}={want.get(key)!r}; resume with the same "
                               "settings, or delete the journal to start again")
