"""Config files (`configs/*.py`, ml-collections) -> frozen dataclasses, with clear errors."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import ml_collections

from rcca_jax.models.config import LingConfig
from rcca_jax.sharding import MESH_AXES


class ConfigError(ValueError):
    pass


def load(spec: str) -> ml_collections.ConfigDict:
    """Loads `path/to/config.py[:arg]` by calling its `get_config(arg)`."""
    path, _, arg = spec.partition(":")
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: config file not found")
    mod_spec = importlib.util.spec_from_file_location(f"rcca_config_{p.stem}", p)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ConfigError(f"{path}: defines no get_config(arg)")
    return module.get_config(arg or None)


def _plain(v: Any) -> Any:
    if isinstance(v, ml_collections.ConfigDict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return tuple(v)
    return v


def model_config(cd: ml_collections.ConfigDict | dict, where: str = "config.model") -> LingConfig:
    """LingConfig from a `model` section (LingConfig's defaults, the released model's shape,
    for fields it leaves out; `init_from` is not a field); unknown keys are errors naming them."""
    d = {k: v for k, v in _plain(cd).items() if k != "init_from"}
    fields = {f.name for f in dataclasses.fields(LingConfig)}
    unknown = sorted(set(d) - fields)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; LingConfig has {sorted(fields)}")
    try:
        return LingConfig(**d)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from e


def mesh_shape(cd: ml_collections.ConfigDict | dict, n_devices: int,
               where: str = "config.mesh") -> dict[str, int]:
    """Resolves one -1 entry so the mesh uses all `n_devices`."""
    d = {k: int(v) for k, v in _plain(cd).items()}
    unknown = sorted(set(d) - set(MESH_AXES))
    if unknown:
        raise ConfigError(f"{where}: unknown mesh axes {unknown}; expected {list(MESH_AXES)}")
    free = [k for k, v in d.items() if v == -1]
    if len(free) > 1:
        raise ConfigError(f"{where}: at most one axis may be -1, got {free}")
    fixed = 1
    for k, v in d.items():
        if v != -1:
            if v < 1:
                raise ConfigError(f"{where}.{k}={v}: must be >= 1 or -1")
            fixed *= v
    if free:
        if n_devices % fixed:
            raise ConfigError(f"{where}: fixed axes use {fixed} devices, which does not divide {n_devices}")
        d[free[0]] = n_devices // fixed
    elif fixed != n_devices:
        raise ConfigError(f"{where}: mesh has {fixed} devices but {n_devices} are available")
    return d
