"""Minimal safetensors reading (memory-mapped, sliceable) and writing.

Reading maps the file and returns NumPy views, so a slice of a tensor (say
the experts one device holds) touches only those bytes. bfloat16 comes from
`ml_dtypes`, which NumPy lacks natively.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


class SafetensorsFile:
    """One .safetensors file: `keys()`, `shape(name)`, `get(name)` -> mmap-backed array."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        self._offset = 8 + n
        self.meta = header.pop("__metadata__", {})
        self.header = header
        self._mm = None

    def keys(self) -> list[str]:
        return list(self.header)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.header[name]["shape"])

    def nbytes(self, name: str) -> int:
        start, end = self.header[name]["data_offsets"]
        return end - start

    def get(self, name: str) -> np.ndarray:
        info = self.header[name]
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{self.path}: tensor {name!r} has unsupported dtype {info['dtype']}")
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        start, end = info["data_offsets"]
        raw = self._mm[self._offset + start:self._offset + end]
        return raw.view(_DTYPES[info["dtype"]]).reshape(info["shape"])


def save_file(tensors: dict[str, np.ndarray], path: str | Path, metadata: dict | None = None) -> None:
    """Writes `tensors` as one safetensors file (keys sorted, 8-byte aligned header)."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    names = sorted(tensors)
    for name in names:
        a = np.ascontiguousarray(tensors[name])
        if a.dtype not in _NAMES:
            raise ValueError(f"tensor {name!r}: dtype {a.dtype} cannot be stored in safetensors")
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((-len(blob)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in names:
            f.write(np.ascontiguousarray(tensors[name]).tobytes())
