"""The layout the README's architecture table describes: the CPU side never imports JAX."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_evaluator_module_imports_jax():
    modules = sorted(".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
                     for p in (REPO / "evaluators").rglob("*.py") if p.name != "__main__.py")
    assert len(modules) > 30 and "evaluators.tasks.family" in modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'flax'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
