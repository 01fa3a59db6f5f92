"""Tasks as a tensorflow-datasets dataset (array_record files; TensorFlow not needed), read with grain.

Two sources behind one builder: our generated task family, or any tasks.jsonl
in the spec's format (e.g. InteractScience). Each record holds the task id,
its prompt and the whole task as JSON, so the loop and the evaluator see the
same task. Two splits: "eval", the held-out tasks (a fraction chosen by a hash
of each task id, `is_held_out`, or a separate tasks.jsonl), and "train", the
rest; no task is in both. Reading goes through `builder.as_data_source()`
(random access) into a grain pipeline: seeded shuffle per epoch, endless repeat,
and a JSON-able iterator state for checkpoints. Every process reads the same
stream; the loop gives each its share of a step's prompts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import grain
import jax
import tensorflow_datasets as tfds


SPLIT_SALT = "rcca-split-v1"  # changing it re-draws every held-out set: never do it silently


def is_held_out(task_id: str, fraction: float) -> bool:
    """Whether a task is held out: a hash of its id, uniform in [0, 1), is below `fraction`.

    Deterministic and per task: the same task is held out whatever file it comes
    in, in every run and on every machine.
    """
    h = hashlib.sha256(f"{SPLIT_SALT}:{task_id}".encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64 < fraction


@dataclasses.dataclass
class TasksConfig(tfds.core.BuilderConfig):
    """source: "taskfamily" (num_tasks, seed) or the path of a tasks.jsonl; the held-out
    split is `eval_fraction` of it by `is_held_out`, or the tasks of `eval_source`."""

    source: str = "taskfamily"
    num_tasks: int = 32
    seed: int = 0
    eval_fraction: float = 0.0
    eval_source: str = ""


class RccaTasks(tfds.core.GeneratorBasedBuilder):
    """RCCA tasks: {"id", "prompt", "task" (the task's JSON)}; splits "train" and "eval"."""

    VERSION = tfds.core.Version("2.0.0")
    RELEASE_NOTES = {"1.0.0": "Task format version 1.", "2.0.0": "Held-out split \"eval\"."}

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "id": tfds.features.Text(), "prompt": tfds.features.Text(), "task": tfds.features.Text()}),
            description="RCCA tasks (request + executable rubrics).")

    def _split_generators(self, dl_manager):
        del dl_manager
        train, held = split_tasks(self.builder_config)
        splits = {"train": self._generate_examples(train)}
        if held:  # tfds writes no empty split: an absent "eval" reads as no held-out task
            splits["eval"] = self._generate_examples(held)
        return splits

    def _generate_examples(self, tasks: list[dict]):
        for task in tasks:
            yield task["id"], {"id": task["id"], "prompt": task["prompt"],
                               "task": json.dumps(task, ensure_ascii=False)}


def read_tasks(source: str, num_tasks: int = 32, seed: int = 0) -> list[dict]:
    """The task dicts of a source, each validated (`evaluators.tasks.parse_task`).

    Raises:
      evaluators.tasks.FormatError: naming the file, line and field.
    """
    from evaluators.tasks import iter_jsonl, parse_task

    if source == "taskfamily":
        from evaluators.tasks import family as taskfamily

        return taskfamily.generate(num_tasks, seed=seed)
    out, seen = [], set()
    for line, obj in iter_jsonl(source):
        task = parse_task(obj, source, line)
        if task.id in seen:
            from evaluators.tasks import FormatError

            raise FormatError(source, line, "id", f"duplicate task id '{task.id}'")
        seen.add(task.id)
        out.append(obj)
    return out


def split_tasks(cfg: TasksConfig) -> tuple[list[dict], list[dict]]:
    """(train, held-out) tasks of a config; no id is in both."""
    tasks = read_tasks(cfg.source, cfg.num_tasks, cfg.seed)
    if cfg.eval_source:
        held = read_tasks(cfg.eval_source)
        ids = {t["id"] for t in held}
        return [t for t in tasks if t["id"] not in ids], held
    held = [t for t in tasks if is_held_out(t["id"], cfg.eval_fraction)]
    return [t for t in tasks if not is_held_out(t["id"], cfg.eval_fraction)], held


def _source_name(source: str, num_tasks: int, seed: int) -> str:
    if source == "taskfamily":
        return f"taskfamily-n{num_tasks}-s{seed}"
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()[:12]
    return f"jsonl-{Path(source).stem}-{digest}"


def tasks_config(source: str, num_tasks: int = 32, seed: int = 0, eval_fraction: float = 0.0,
                 eval_source: str = "") -> TasksConfig:
    """A config whose name identifies its content and split (a change is a new dataset)."""
    name = _source_name(source, num_tasks, seed)
    if eval_source:
        name += "-eval-" + _source_name(eval_source, 0, 0)
    elif eval_fraction:
        name += f"-heldout{eval_fraction:g}"
    return TasksConfig(name=name, source=source, num_tasks=num_tasks, seed=seed,
                       eval_fraction=eval_fraction, eval_source=eval_source)


def prepare(data_dir: str | Path, config: TasksConfig, split: str = "train"):
    """Builds the array_record files once (idempotent) and returns a split's random-access source.

    Process 0 builds first and the others wait for it, so processes sharing a
    filesystem never write the same files at once; a process that still finds
    nothing (a filesystem of its own) then builds its own copy.
    """
    def build():
        b = RccaTasks(config=config, data_dir=str(data_dir), file_format="array_record")
        b.download_and_prepare(download_config=tfds.download.DownloadConfig(verify_ssl=False))
        return b

    builder = build() if jax.process_index() == 0 else None
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("rcca-tasks-prepared")
        builder = builder or build()  # a no-op where process 0's files are visible
    if split not in builder.info.splits:
        return []
    return builder.as_data_source(split=split)


def decode(record: dict) -> dict:
    """A data-source record -> the task dict."""
    raw = record["task"]
    return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)


def task_stream(source, seed: int) -> grain.MapDataset:
    """Endless, per-epoch reshuffled task dicts (the same stream on every process)."""
    ds = grain.MapDataset.source(source)
    return ds.shuffle(seed=seed).repeat(None).map(decode)
