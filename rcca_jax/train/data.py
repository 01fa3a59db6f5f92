"""Tasks (tfds + grain), the tokenizer and a checkpointable prompt stream for the loop."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from evaluators.tasks import load_tasks
from rcca_jax.train.config import DataConfig


@dataclasses.dataclass
class TaskData:
    tasks: dict            # {id: evaluators.tasks.Task}
    raw: dict              # {id: task dict} (prompt, meta.reference, ...)
    tokenizer: object      # transformers fast tokenizer (byte-level BPE)
    source: object = None  # the tfds data source (random access)

    def prompt_ids(self, task_id: str) -> list[int]:
        from rcca_jax.data.tokenizer import prompt_text

        return self.tokenizer(prompt_text(self.raw[task_id]), add_special_tokens=False)["input_ids"]

    def reference_ids(self, task_id: str) -> list[int]:
        from rcca_jax.data.taskfamily import reference_response

        text = reference_response(self.raw[task_id])
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.eos_id]

    @property
    def eos_id(self) -> int:
        return int(self.tokenizer.convert_tokens_to_ids("<eos>"))

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.convert_tokens_to_ids("<pad>"))


def load_task_data(cfg: DataConfig, workdir: Path) -> TaskData:
    """Builds the tfds dataset (once), validates the tasks, loads or trains the tokenizer."""
    from rcca_jax.data import tfds_tasks
    from rcca_jax.data.tokenizer import load_or_train

    workdir.mkdir(parents=True, exist_ok=True)
    source = tfds_tasks.prepare(workdir / "tfds", tfds_tasks.tasks_config(cfg.source, cfg.num_tasks, cfg.seed))
    raw_list = [tfds_tasks.decode(source[i]) for i in range(len(source))]
    path = workdir / "tasks.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in raw_list), "utf-8")
    tasks = load_tasks(path)  # validates; errors name file, line and field
    raw = {t["id"]: t for t in raw_list}
    tok_path = Path(cfg.tokenizer) if cfg.tokenizer else workdir / "tokenizer"
    tokenizer = load_or_train(tok_path, raw_list, cfg.vocab_size)
    return TaskData(tasks, raw, tokenizer, source)


class PromptStream:
    """Task ids from the grain pipeline (`tfds_tasks.task_stream`), with checkpointable state.

    The state is saved with the checkpoint, so a resumed run sees exactly the
    prompts the uninterrupted run would have seen.
    """

    def __init__(self, source, seed: int, state: dict | None = None):
        from rcca_jax.data.tfds_tasks import task_stream

        self._it = iter(task_stream(source, seed).to_iter_dataset())
        if state:
            self._it.set_state(state)

    def next(self, n: int) -> list[str]:
        return [next(self._it)["id"] for _ in range(n)]

    def state(self) -> dict:
        return self._it.get_state()
