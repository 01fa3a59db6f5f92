"""The judge's on-disk cache: one JSON file per (judge model, prompt, task, rubrics, response).

GRPO groups often hold identical responses and benchmarks are re-scored; a hit costs no
request. Files are written whole (a temporary file, then a rename), so a worker killed while
writing leaves no half entry, and several workers may share the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from evaluators.judge.config import JudgeConfig


def key(cfg: JudgeConfig, task_id: str, rubric_ids: list[str], response: str) -> str:
    parts = [cfg.model, cfg.prompt_version, cfg.structured, cfg.agentic, task_id,
             sorted(rubric_ids),
             hashlib.sha256(response.encode("utf-8", "surrogatepass")).hexdigest()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class JudgeCache:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def _path(self, k: str) -> Path:
        return self.folder / k[:2] / f"{k}.json"

    def get(self, k: str) -> dict | None:
        try:
            return json.loads(self._path(k).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, k: str, value: dict) -> None:
        path = self._path(k)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value), encoding="utf-8")
        tmp.replace(path)
