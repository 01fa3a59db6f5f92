"""TensorBoard scalars, text samples and a console line per step."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np


class MetricsLog:
    """Writes every scalar metric to TensorBoard (tensorboardX, no TensorFlow needed)."""

    def __init__(self, directory: str | Path, enabled: bool = True):
        self.writer = None
        if enabled:
            from tensorboardX import SummaryWriter

            self.writer = SummaryWriter(str(directory))
        self.history: list[dict] = []

    def scalars(self, step: int, metrics: Mapping[str, float | np.ndarray]) -> dict:
        flat = {}
        for k, v in metrics.items():
            a = np.asarray(v)
            if a.ndim == 0:
                flat[k] = float(a)
            elif self.writer is not None and a.size:
                self.writer.add_histogram(k, a.reshape(-1), step)
        if self.writer is not None:
            for k, v in flat.items():
                self.writer.add_scalar(k, v, step)
        self.history.append({"step": step, **flat})
        return flat

    def text(self, step: int, tag: str, text: str) -> None:
        if self.writer is not None:
            self.writer.add_text(tag, "```\n" + text + "\n```", step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
