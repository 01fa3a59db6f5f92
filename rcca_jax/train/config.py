"""The run configuration: ml-collections config files -> one frozen dataclass tree."""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_collections

from rcca_jax.configs import ConfigError, _plain, mesh_shape, model_config
from rcca_jax.models.config import LingConfig
from rcca_jax.rl.sampler import SamplerConfig
from rcca_jax.rl.train_step import TrainConfig


@dataclasses.dataclass(frozen=True)
class DataConfig:
    source: str = "taskfamily"  # "taskfamily" (generated) or a tasks.jsonl path
    num_tasks: int = 32         # taskfamily only
    seed: int = 0
    vocab_size: int = 1024      # tokenizer trained on the task family
    tokenizer: str = ""         # path of a saved tokenizer; empty: train one in the workdir


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    steps: int = 0
    batch_size: int = 8
    learning_rate: float = 3e-3
    warmup_steps: int = 10


@dataclasses.dataclass(frozen=True)
class RLConfig:
    steps: int = 0
    prompts_per_step: int = 4
    method: str = "rcca"           # "rcca" (token weights) or "grpo" (flat weights)
    reward: str = "gated"          # "gated" (F/S/E gates + rubrics) or "pass_rate" (rubrics passed / all)
    localization: str = "grounded"  # evaluators.localize method
    eval_prompts: int = 8          # prompts scored after SFT and after RL (see eval_samples)
    updates_per_step: int = 1      # optimizer steps on each rollout batch (the clipped ratio keeps
                                   # later ones near the sampling policy, as in PPO epochs)
    eval_samples: int = 0          # samples per eval prompt at the sampling temperature
                                   # (0: one greedy answer)
    prompts_per_sample: int = 1    # prompts per sampler call; each call's groups are evaluated
                                   # while the next call samples (streaming)


@dataclasses.dataclass(frozen=True)
class EvaluatorConfig:
    backend: str = "local"  # "local" process pool, or "ray" actors (rcca_jax.train.rewards.FLEETS)
    ray_address: str = ""   # "" starts a local Ray instance; "auto" joins a running cluster
    workers: int = 1
    pages_per_worker: int = 4
    min_pages: int = 2      # pages per worker admitted however busy the CPUs are (BrowserConfig.min_pages)
    probe_time_limit_ms: int = 30000
    action_timeout_ms: int = 0  # 0: actions wait up to the probe's time limit (Playwright's default)
    max_pending: int = 256  # back-pressure: rows queued or in flight before `submit` blocks (0: none)


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    every_steps: int = 50
    max_to_keep: int = 2
    async_save: bool = True


@dataclasses.dataclass(frozen=True)
class LogConfig:
    every_steps: int = 1
    sample_apps: int = 1            # apps logged as text per RL step
    profile_start: int = -1         # jax.profiler trace window (steps), -1: off
    profile_steps: int = 0


@dataclasses.dataclass(frozen=True)
class RunConfig:
    model: LingConfig
    train: TrainConfig
    sampler: SamplerConfig
    data: DataConfig
    sft: SFTConfig
    rl: RLConfig
    evaluator: EvaluatorConfig
    checkpoint: CheckpointConfig
    log: LogConfig
    mesh: dict
    seq_len: int = 1024
    seed: int = 0


_SECTIONS = {"train": TrainConfig, "sampler": SamplerConfig, "data": DataConfig, "sft": SFTConfig,
             "rl": RLConfig, "evaluator": EvaluatorConfig, "checkpoint": CheckpointConfig,
             "log": LogConfig}
_CHOICES = {("rl", "method"): ("rcca", "grpo"), ("rl", "reward"): ("gated", "pass_rate"),
            ("evaluator", "backend"): ("local", "ray"),
            ("rl", "localization"): ("grounded", "text", "naive"),
            ("train", "weight_norm"): ("none", "row_mean"), ("train", "optimizer"): ("adamw", "sgd"),
            ("train", "agg"): ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm")}


def _section(name: str, cls, values: dict[str, Any]):
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(f"config.{name}: unknown field(s) {unknown}; expected some of {sorted(fields)}")
    for (sec, key), allowed in _CHOICES.items():
        if sec == name and key in values and values[key] not in allowed:
            raise ConfigError(f"config.{name}.{key}={values[key]!r}: expected one of {list(allowed)}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"config.{name}: {e}") from e


def run_config(cd: ml_collections.ConfigDict, n_devices: int) -> RunConfig:
    """Validates a loaded config file into a RunConfig (errors name the field)."""
    d = _plain(cd)
    known = set(_SECTIONS) | {"model", "mesh", "seq_len", "seed", "batch_size"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ConfigError(f"config: unknown section(s) {unknown}; expected some of {sorted(known)}")
    sections = {name: _section(name, cls, dict(d.get(name, {}))) for name, cls in _SECTIONS.items()}
    if sections["sampler"].group_size < 2 and sections["rl"].steps:
        raise ConfigError("config.sampler.group_size: GRPO needs at least 2 samples per prompt")
    rl = sections["rl"]
    if rl.updates_per_step < 1:
        raise ConfigError(f"config.rl.updates_per_step={rl.updates_per_step} must be >= 1")
    if rl.eval_samples < 0:
        raise ConfigError(f"config.rl.eval_samples={rl.eval_samples} must be >= 0")
    if rl.steps and not 1 <= rl.prompts_per_sample <= rl.prompts_per_step:
        raise ConfigError(f"config.rl.prompts_per_sample={rl.prompts_per_sample} must be in "
                          f"[1, config.rl.prompts_per_step={rl.prompts_per_step}]")
    if sections["rl"].steps and sections["sampler"].temperature != sections["train"].temperature:
        # The ratio's old log-probs are under the tempered policy; the step must recompute the same.
        raise ConfigError(f"config.train.temperature={sections['train'].temperature} must equal "
                          f"config.sampler.temperature={sections['sampler'].temperature}")
    return RunConfig(model=model_config(d.get("model", {})),
                     mesh=mesh_shape(d.get("mesh", {"fsdp": -1}), n_devices),
                     seq_len=int(d.get("seq_len", 1024)), seed=int(d.get("seed", 0)), **sections)
