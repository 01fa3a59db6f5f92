"""Shared fixtures of the localization tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ANSWERS_DIR = REPO_ROOT.parent / "shared" / "data" / "interactscience" / "answers"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than about 20 seconds")


@pytest.fixture(scope="session")
def answers() -> list[dict]:
    """All recorded model answers, read from ../shared; skips the test when it is absent."""
    if not ANSWERS_DIR.is_dir():
        pytest.skip(f"benchmark answers not found at ../shared/data/interactscience/answers "
                    f"relative to the repository root ({REPO_ROOT.name})")
    answers = []
    for path in sorted(ANSWERS_DIR.glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            answers.extend(json.loads(line) for line in f if line.strip())
    return answers
