"""The run configuration: ml-collections config files -> one frozen dataclass tree.

Every section is a frozen dataclass; unknown keys are errors that name them, and
every choice is validated against the registry that implements it (optimizers,
weight norms, aggregators, fleets, rewards, localization methods), so a new entry
in a registry is a new valid choice with no list to keep in step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import ml_collections

from evaluators.config import EvalConfig
from evaluators.localize.rules import LocalizeConfig
from evaluators.localize.weights import WeightConfig
from rcca_jax.configs import ConfigError, _plain, mesh_shape
from rcca_jax.models.config import RUNTIME_FIELDS, LingConfig
from rcca_jax.rl.sampler import SamplerConfig
from rcca_jax.rl.train_step import TrainConfig

SCRATCH = "scratch"  # model.init_from: a new random policy written in the released format first


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Where the policy comes from and the LingConfig fields the config file sets.

    Attributes:
      init_from: a released-format checkpoint folder (local or gs://: safetensors +
        index, config.json, tokenizer files with a chat template,
        generation_config.json), or "scratch": a random policy of the shape in
        `fields` with a tokenizer trained on the training tasks, written in that
        format into `<workdir>/init` on first use and then loaded like any other.
      fields: LingConfig fields. With a checkpoint only `RUNTIME_FIELDS` may differ
        from its config.json (a shape override is an error when it is opened).
    """

    init_from: str = ""
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Tasks, the held-out split and the SFT data.

    Attributes:
      source: "taskfamily" (generated: `num_tasks`, `seed`) or a tasks.jsonl path.
      eval_fraction: share of `source` held out for evaluation, chosen by a hash of
        the task id (`rcca_jax.data.tfds_tasks.is_held_out`): the same task is held
        out in every run, whatever else the file holds.
      eval_source: a separate held-out tasks.jsonl instead (then `eval_fraction` must
        be 0); tasks of `source` with an id in it are dropped from training.
      sft_source: "references" (each training task's `meta.reference`), one or more
        responses JSONL files separated by commas (`{task_id, response}`, e.g. other
        models' answers), or "" for no SFT data.
      sft_min_reward: >= 0 keeps only SFT responses whose gated reward, scored by our
        evaluator before SFT, is at least this (rejection-sampled SFT); < 0 keeps all.
      sft_bug_fraction: the credit-assignment testbed (`evaluators.tasks.bugs`): this share
        of training tasks (by a hash of the id and `seed`) have one realistic local bug
        put into the reference SFT learns from, recorded in the task's `meta.sft_bug`
        (so the `oracle` localization can blame exactly it). Needs
        `sft_source="references"`.
    """

    source: str = "taskfamily"
    num_tasks: int = 32
    seed: int = 0
    eval_fraction: float = 0.25
    eval_source: str = ""
    sft_source: str = "references"
    sft_min_reward: float = -1.0
    sft_bug_fraction: float = 0.0


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    steps: int = 0
    batch_size: int = 8
    learning_rate: float = 3e-3
    warmup_steps: int = 10


@dataclasses.dataclass(frozen=True)
class RLConfig:
    steps: int = 0
    prompts_per_step: int = 4      # over all processes; each samples its own share
    method: str = "rcca"           # a key of rcca_jax.train.credit.CREDIT: "rcca" (token
                                   # weights), "grpo" (flat), or a control arm
    reward: str = "gated"          # a key of rcca_jax.train.rewards.REWARDS
    localization: str = "grounded"  # a key of evaluators.localize.spans.METHODS
    updates_per_step: int = 1      # optimizer steps on each rollout batch (the clipped ratio keeps
                                   # later ones near the sampling policy, as in PPO epochs)
    prompts_per_sample: int = 1    # prompts per sampler call and process; each call's groups are
                                   # evaluated while the next call samples (streaming)


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """Held-out evaluation (after SFT, after RL, every N RL steps, standalone).

    Attributes:
      max_tasks: held-out tasks evaluated (0: all of them), the first by id.
      samples: answers per task at the sampling temperature (what RL maximises);
        0: one greedy answer.
      every_steps: also evaluate every N RL steps (0: only after SFT and after RL).
      after_sft: evaluate the SFT policy before RL starts.
    """

    max_tasks: int = 0
    samples: int = 1
    every_steps: int = 0
    after_sft: bool = True


@dataclasses.dataclass(frozen=True)
class EvaluatorConfig:
    """The evaluator fleet, and the evaluator's own config nested in it.

    Attributes:
      backend: A key of `rcca_jax.train.rewards.FLEETS`.
      ray_address: "" starts a local Ray instance; "auto" joins a running cluster.
      workers: Browser worker processes (or Ray actors).
      max_pending: Back-pressure: rows queued or in flight before `submit` blocks (0: none).
      scoring: `evaluators.config.EvalConfig` itself (reward, browser, retries...), e.g.
        `--config.evaluator.scoring.browser.probe_time_limit_ms=10000`. The run turns JS
        coverage on (localization needs it); the reward's penalty and ceiling tables have
        tuple keys and are set in Python, not in a config file.
      localize: `evaluators.localize.rules.LocalizeConfig`, what the workers' localizer
        reads: rules switched off (ids checked against the rule registry), limits and the
        naming words, e.g. `--config.evaluator.localize.disabled_rules="('probe.binding',)"`.
      weights: `evaluators.localize.weights.WeightConfig`, the base token weights (direct,
        context, other, cap) the workers compute; the sign rule stays in `config.train`.
      compute_nice: the niceness of the trainer's compute threads (XLA's;
        `rcca_jax.train.priority`), so that pages scoring on the same cores (the local
        fleet, a local Ray) get the CPU first: a page starved by the step runs past its
        time limit and its verdict would depend on the step. It costs the step nothing
        where nothing else wants the cores. None: left as they are.
    """

    backend: str = "local"
    ray_address: str = ""
    workers: int = 1
    max_pending: int = 256
    scoring: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    localize: LocalizeConfig = dataclasses.field(default_factory=LocalizeConfig)
    weights: WeightConfig = dataclasses.field(default_factory=WeightConfig)
    compute_nice: int | None = 10

    def __post_init__(self):
        if self.compute_nice is not None and not 0 <= self.compute_nice <= 19:
            raise ValueError(f"evaluator.compute_nice must be within 0..19 or None, got "
                             f"{self.compute_nice}")
        import evaluators.localize.spans  # noqa: F401  (registers every rule)

        self.localize.validate()  # a ValueError naming the unknown rule id


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    every_steps: int = 50
    max_to_keep: int = 2
    async_save: bool = True


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Released-format exports of the policy (`save_pretrained`) into `<workdir>/export`.

    Attributes:
      every_steps: also export every N RL steps (0: only the final policy).
      dtype: tensor dtype of the export; "" keeps the checkpoint's own (config.json's
        `torch_dtype`, float32 if it names none).
    """

    every_steps: int = 0
    dtype: str = ""


@dataclasses.dataclass(frozen=True)
class LogConfig:
    every_steps: int = 1
    sample_apps: int = 1            # apps logged as text per RL step
    profile_start: int = -1         # jax.profiler trace window (steps), -1: off
    profile_steps: int = 0


@dataclasses.dataclass(frozen=True)
class RunConfig:
    model: ModelConfig
    train: TrainConfig
    sampler: SamplerConfig
    data: DataConfig
    sft: SFTConfig
    rl: RLConfig
    eval: EvaluationConfig
    evaluator: EvaluatorConfig
    checkpoint: CheckpointConfig
    export: ExportConfig
    log: LogConfig
    mesh: dict
    seq_len: int = 1024
    seed: int = 0


_SECTIONS = {"train": TrainConfig, "sampler": SamplerConfig, "data": DataConfig, "sft": SFTConfig,
             "rl": RLConfig, "eval": EvaluationConfig, "evaluator": EvaluatorConfig,
             "checkpoint": CheckpointConfig, "export": ExportConfig, "log": LogConfig}
_TOP = {"model", "mesh", "seq_len", "seed"}


def _registries() -> dict[tuple[str, str], Mapping]:
    """Each choice and the registry whose keys are its valid values."""
    from evaluators.localize.spans import METHODS
    from rcca_jax.rl.loss import AGGREGATORS, KL_ESTIMATORS, WEIGHT_NORMS
    from rcca_jax.rl.train_step import LR_SCHEDULES, OPTIMIZERS
    from rcca_jax.train.credit import CREDIT
    from rcca_jax.train.rewards import FLEETS, REWARDS

    return {("rl", "method"): CREDIT, ("rl", "reward"): REWARDS,
            ("rl", "localization"): METHODS, ("evaluator", "backend"): FLEETS,
            ("train", "weight_norm"): WEIGHT_NORMS, ("train", "optimizer"): OPTIMIZERS,
            ("train", "agg"): AGGREGATORS, ("train", "kl_estimator"): KL_ESTIMATORS,
            ("train", "lr_schedule"): LR_SCHEDULES}


def _nested(f: dataclasses.Field) -> type | None:
    """The dataclass type of a field whose default is a dataclass (a nested section)."""
    if f.default_factory is dataclasses.MISSING:
        return None
    value = f.default_factory()
    return type(value) if dataclasses.is_dataclass(value) else None


def _build(cls, values: dict[str, Any], where: str):
    """`cls` from a section's values, nested sections too; unknown keys are errors."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; expected some of {sorted(fields)}")
    values = dict(values)
    for name, f in fields.items():
        sub = _nested(f)
        if sub is not None and isinstance(values.get(name), dict):
            values[name] = _build(sub, values[name], f"{where}.{name}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from e


def _section(name: str, cls, values: dict[str, Any]):
    for (sec, key), registry in _registries().items():
        if sec == name and key in values and values[key] not in registry:
            raise ConfigError(f"config.{name}.{key}={values[key]!r}: expected one of {sorted(registry)}")
    return _build(cls, values, f"config.{name}")


def model_section(values: dict[str, Any]) -> ModelConfig:
    """`config.model`: `init_from` plus LingConfig fields (unknown names are errors)."""
    values = dict(values)
    init_from = str(values.pop("init_from", "") or "")
    known = {f.name for f in dataclasses.fields(LingConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"config.model: unknown field(s) {unknown}; expected init_from or "
                          f"LingConfig fields {sorted(known)}")
    if not init_from:
        raise ConfigError("config.model.init_from: missing; give a released-format checkpoint "
                          f"folder (--config.model.init_from=DIR) or {SCRATCH!r}")
    if init_from == SCRATCH:
        try:
            LingConfig(**values)  # the shape a scratch policy is built with must be valid
        except (TypeError, ValueError) as e:
            raise ConfigError(f"config.model: {e}") from e
    return ModelConfig(init_from=init_from, fields=values)


def _check(cfg: RunConfig) -> None:
    rl, ev = cfg.rl, cfg.eval
    if cfg.sampler.group_size < 2 and rl.steps:
        raise ConfigError("config.sampler.group_size: GRPO needs at least 2 samples per prompt")
    if rl.updates_per_step < 1:
        raise ConfigError(f"config.rl.updates_per_step={rl.updates_per_step} must be >= 1")
    if rl.steps and not 1 <= rl.prompts_per_sample <= rl.prompts_per_step:
        raise ConfigError(f"config.rl.prompts_per_sample={rl.prompts_per_sample} must be in "
                          f"[1, config.rl.prompts_per_step={rl.prompts_per_step}]")
    if ev.samples < 0 or ev.max_tasks < 0:
        raise ConfigError(f"config.eval: samples={ev.samples} and max_tasks={ev.max_tasks} must be >= 0")
    d = cfg.data
    if not d.source:
        raise ConfigError("config.data.source: missing; give 'taskfamily' or a tasks.jsonl "
                          "(--config.data.source=PATH)")
    if not 0.0 <= d.sft_bug_fraction <= 1.0:
        raise ConfigError(f"config.data.sft_bug_fraction={d.sft_bug_fraction} must be in [0, 1]")
    if d.sft_bug_fraction and d.sft_source != "references":
        raise ConfigError("config.data.sft_bug_fraction needs sft_source='references' (bugs are "
                          f"put into the tasks' references), got sft_source={d.sft_source!r}")
    if not 0.0 <= d.eval_fraction < 1.0:
        raise ConfigError(f"config.data.eval_fraction={d.eval_fraction} must be in [0, 1)")
    if d.eval_source and d.eval_fraction:
        raise ConfigError("config.data: give either eval_source or eval_fraction, not both "
                          f"(eval_fraction={d.eval_fraction}, eval_source={d.eval_source!r})")
    if cfg.sft.steps and not d.sft_source:
        raise ConfigError(f"config.sft.steps={cfg.sft.steps} needs config.data.sft_source")
    if cfg.sampler.max_new_tokens >= cfg.seq_len:
        raise ConfigError(f"config.sampler.max_new_tokens={cfg.sampler.max_new_tokens} leaves no "
                          f"room for a prompt in config.seq_len={cfg.seq_len}")


def run_config(cd: ml_collections.ConfigDict, n_devices: int) -> RunConfig:
    """Validates a loaded config file into a RunConfig (errors name the field)."""
    d = _plain(cd)
    known = set(_SECTIONS) | _TOP
    unknown = sorted(set(d) - known)
    if unknown:
        raise ConfigError(f"config: unknown section(s) {unknown}; expected some of {sorted(known)}")
    sections = {name: _section(name, cls, dict(d.get(name, {}))) for name, cls in _SECTIONS.items()}
    cfg = RunConfig(model=model_section(d.get("model", {})),
                    mesh=mesh_shape(d.get("mesh", {"fsdp": -1}), n_devices),
                    seq_len=int(d.get("seq_len", 1024)), seed=int(d.get("seed", 0)), **sections)
    _check(cfg)
    return cfg


_OPTIONAL = {"float | None": float, "int | None": int, "str | None": str, "bool | None": bool}


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return dataclasses.MISSING
    if isinstance(value, frozenset):  # a set: the command line writes it as a tuple
        return tuple(sorted(value))
    if value is None:  # typed, so the command line can set it (ml-collections placeholder)
        kind = _OPTIONAL.get(str(f.type))
        return ml_collections.config_dict.placeholder(kind) if kind else dataclasses.MISSING
    return value


def complete(cd: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Fills every section with all its dataclass's fields at their defaults (values the
    file sets stay), so any field can be set on the command line, e.g.
    `--config.train.kl_coef=0.01`. The model section gets `init_from` and the run-time
    fields (`RUNTIME_FIELDS`) only: a checkpoint's shape comes from its config.json.
    """
    with cd.unlocked():
        for name, cls in _SECTIONS.items():
            if name not in cd:
                cd[name] = ml_collections.ConfigDict()
            _fill(cd[name], cls)
        if "model" not in cd:
            cd.model = ml_collections.ConfigDict()
        lf = {f.name: f for f in dataclasses.fields(LingConfig)}
        for name in ("init_from",) + RUNTIME_FIELDS:
            if name not in cd.model:
                cd.model[name] = "" if name == "init_from" else _default(lf[name])
        for name, value in (("seed", 0), ("seq_len", 1024)):
            if name not in cd:
                cd[name] = value
    return cd


def _fill(cd: ml_collections.ConfigDict, cls) -> None:
    """Every field of `cls` (nested sections too) at its default where `cd` leaves it out."""
    for f in dataclasses.fields(cls):
        sub = _nested(f)
        if sub is not None:
            if f.name not in cd:
                cd[f.name] = ml_collections.ConfigDict()
            _fill(cd[f.name], sub)
            continue
        value = _default(f)
        if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
            continue  # tuple-keyed tables (reward penalties): set in Python
        if f.name not in cd and value is not dataclasses.MISSING:
            cd[f.name] = value


def checkpoint_overrides(model: ModelConfig, ckpt: LingConfig, where: str) -> dict[str, Any]:
    """The config file's LingConfig fields to apply over a checkpoint's config.json.

    Run-time fields (`RUNTIME_FIELDS`) are returned; any other field must equal the
    checkpoint's value.

    Raises:
      ConfigError: a shape field differs from the checkpoint's, naming both values and
        the checkpoint's config.json (`where`).
    """
    out = {}
    for k, v in model.fields.items():
        if k in RUNTIME_FIELDS:
            out[k] = v
            continue
        have = getattr(ckpt, k)
        if (tuple(v) if isinstance(v, list) else v) != have:
            raise ConfigError(f"config.model.{k}={v!r} differs from {where} ({k}={have!r}): the "
                              f"shape of a checkpoint cannot be overridden; only {list(RUNTIME_FIELDS)} "
                              "may be set with model.init_from")
    return out
