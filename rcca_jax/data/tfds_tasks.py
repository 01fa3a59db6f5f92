"""Tasks as a tensorflow-datasets dataset (array_record files; TensorFlow not needed), read with grain.

Two sources behind one builder: our generated task family, or any tasks.jsonl
in the spec's format (e.g. InteractScience). Each record holds the task id,
its prompt and the whole task as JSON, so the loop and the evaluator see the
same task. Reading goes through `builder.as_data_source()` (random access)
into a grain pipeline: seeded shuffle per epoch, endless repeat, one shard
per JAX process, and a JSON-able iterator state for checkpoints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import grain
import jax
import tensorflow_datasets as tfds


@dataclasses.dataclass
class TasksConfig(tfds.core.BuilderConfig):
    """source: "taskfamily" (num_tasks, seed) or the path of a tasks.jsonl."""

    source: str = "taskfamily"
    num_tasks: int = 32
    seed: int = 0


class RccaTasks(tfds.core.GeneratorBasedBuilder):
    """RCCA tasks: {"id", "prompt", "task" (the task's JSON)}; one split, "train"."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Task format version 1."}

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "id": tfds.features.Text(), "prompt": tfds.features.Text(), "task": tfds.features.Text()}),
            description="RCCA tasks (request + executable rubrics).")

    def _split_generators(self, dl_manager):
        del dl_manager
        return {"train": self._generate_examples()}

    def _tasks(self) -> list[dict]:
        cfg = self.builder_config
        if cfg.source == "taskfamily":
            from rcca_jax.data import taskfamily

            return taskfamily.generate(cfg.num_tasks, seed=cfg.seed)
        path = Path(cfg.source)
        out = []
        for i, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{i}: not JSON ({e.msg})") from e
        return out

    def _generate_examples(self):
        for task in self._tasks():
            yield task["id"], {"id": task["id"], "prompt": task["prompt"],
                               "task": json.dumps(task, ensure_ascii=False)}


def tasks_config(source: str, num_tasks: int = 32, seed: int = 0) -> TasksConfig:
    """A config whose name identifies its content (so a changed source is a new dataset)."""
    if source == "taskfamily":
        name = f"taskfamily-n{num_tasks}-s{seed}"
    else:
        digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()[:12]
        name = f"jsonl-{Path(source).stem}-{digest}"
    return TasksConfig(name=name, source=source, num_tasks=num_tasks, seed=seed)


def prepare(data_dir: str | Path, config: TasksConfig):
    """Builds the array_record files once (idempotent) and returns the random-access source."""
    builder = RccaTasks(config=config, data_dir=str(data_dir), file_format="array_record")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(verify_ssl=False))
    return builder.as_data_source(split="train")


def decode(record: dict) -> dict:
    """A data-source record -> the task dict."""
    raw = record["task"]
    return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)


def task_stream(source, seed: int) -> grain.MapDataset:
    """Endless, per-epoch reshuffled task dicts of this process's shard."""
    ds = grain.MapDataset.source(source)
    ds = ds[jax.process_index()::jax.process_count()]
    return ds.shuffle(seed=seed).repeat(None).map(decode)
