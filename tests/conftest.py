"""Shared fixtures. Sets fake devices before anything imports JAX."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def interactscience() -> Path:
    """The InteractScience folder of ../shared/data; skips the test when it is absent."""
    path = SHARED_DATA / "interactscience"
    if not (path / "tasks.jsonl").is_file():
        pytest.skip("needs ../shared/data/interactscience next to the checkout "
                    "(present in CI; absent in a user's clone)")
    return path
