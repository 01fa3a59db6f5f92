"""Tasks (tfds + grain) with their held-out split, SFT examples, checkpointable streams.

What does not fit follows one rule, stated here and counted in the log: a task
whose prompt leaves no room for `sampler.max_new_tokens` new tokens is skipped
(for RL and for evaluation), and an SFT example whose prompt + response + end of
turn exceed `seq_len` is skipped. Nothing is truncated: a cut response would read
as a format failure the model never made.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from evaluators.tasks import FormatError, Task, bugs, iter_jsonl, load_tasks
from rcca_jax.train.config import DataConfig


@dataclasses.dataclass
class TaskData:
    """The run's tasks and their split.

    Attributes:
      tasks: {id: evaluators.tasks.Task} of every task (train and held-out).
      raw: {id: task dict}.
      train_ids / eval_ids: the split, in the tfds splits' order.
      train_source: the tfds random-access source of the training split.
      counts: what was read, kept and skipped, for the log.
    """

    tasks: dict[str, Task]
    raw: dict[str, dict]
    train_ids: list[str]
    eval_ids: list[str]
    train_source: object
    counts: dict[str, int] = dataclasses.field(default_factory=dict)


def load_task_data(cfg: DataConfig, workdir: Path) -> TaskData:
    """Builds the tfds dataset (once) and validates every task.

    Raises:
      evaluators.tasks.FormatError: a malformed task, naming file, line and field.
      ValueError: an empty split that the run needs.
    """
    from rcca_jax.data import tfds_tasks

    workdir.mkdir(parents=True, exist_ok=True)
    tcfg = tfds_tasks.tasks_config(cfg.source, cfg.num_tasks, cfg.seed, cfg.eval_fraction,
                                   cfg.eval_source)
    train_src = tfds_tasks.prepare(workdir / "tfds", tcfg, "train")
    eval_src = tfds_tasks.prepare(workdir / "tfds", tcfg, "eval")
    train = [tfds_tasks.decode(train_src[i]) for i in range(len(train_src))]
    held = [tfds_tasks.decode(eval_src[i]) for i in range(len(eval_src))]
    bugged = _inject_bugs(train, cfg) if cfg.sft_bug_fraction else 0
    path = workdir / "tasks.jsonl"
    write_atomically(path, "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in train + held))
    tasks = load_tasks(path)  # validates; errors name file, line and field
    if not train:
        raise ValueError(f"config.data.source={cfg.source!r}: no training task is left after "
                         "the held-out split")
    counts = {"tasks/train": len(train), "tasks/held_out": len(held), "sft/bugged": bugged}
    return TaskData(tasks, {t["id"]: t for t in train + held}, [t["id"] for t in train],
                    [t["id"] for t in held], train_src, counts)


def write_atomically(path: Path, text: str) -> None:
    """Writes `path` whole through a temporary file beside it and a rename.

    Every process of a run writes the same tasks.jsonl and reads it back; in a shared workdir
    a plain write truncates the file under a reader that has not finished (seen as a
    malformed last task), while a rename swaps in a complete file at once.
    """
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                     suffix=".tmp", delete=False) as f:
        f.write(text)
    os.replace(f.name, path)


def _inject_bugs(train: list[dict], cfg: DataConfig) -> int:
    """Puts one bug into the reference of the selected training tasks (in place: the task
    written to tasks.jsonl carries the bugged reference and `meta.sft_bug`); returns how many.
    Held-out tasks are never touched."""
    n = 0
    for t in train:
        meta = t.get("meta") or {}
        if not meta.get("reference") or not bugs.selected(t["id"], cfg.sft_bug_fraction, cfg.seed):
            continue
        got = bugs.inject(meta["reference"], t["id"], cfg.seed)
        if got is not None:
            t["meta"] = {**meta, "reference": got[0], "sft_bug": got[1].to_json()}
            n += 1
    return n


@dataclasses.dataclass(frozen=True)
class SFTExample:
    task_id: str
    response: str
    source: str  # file (or "references") it came from


def read_sft_examples(cfg: DataConfig, data: TaskData) -> tuple[list[SFTExample], dict[str, int]]:
    """SFT responses of training tasks (`data.sft_source`), with what was dropped and why.

    Responses of held-out tasks are dropped (training never sees a held-out task);
    a task id that is in neither split is an error naming the file and line.
    """
    counts = {"sft/read": 0, "sft/held_out_dropped": 0}
    out: list[SFTExample] = []
    train = set(data.train_ids)
    if cfg.sft_source == "references":
        for tid in data.train_ids:
            ref = (data.raw[tid].get("meta") or {}).get("reference")
            if ref is None:
                raise ValueError(f"config.data.sft_source='references': training task {tid!r} "
                                 "has no meta.reference; give a responses JSONL instead")
            out.append(SFTExample(tid, ref, "references"))
        counts["sft/read"] = len(out)
        return out, counts
    for path in [p.strip() for p in cfg.sft_source.split(",") if p.strip()]:
        for line, obj in iter_jsonl(path):
            if not isinstance(obj, dict) or not isinstance(obj.get("task_id"), str) or \
                    not isinstance(obj.get("response"), str):
                raise FormatError(path, line, "task_id/response", "expected an object with string "
                                  "'task_id' and 'response'")
            counts["sft/read"] += 1
            if obj["task_id"] not in data.tasks:
                raise FormatError(path, line, "task_id", f"unknown task '{obj['task_id']}'")
            if obj["task_id"] not in train:
                counts["sft/held_out_dropped"] += 1
                continue
            out.append(SFTExample(obj["task_id"], obj["response"], path))
    return out, counts


def response_key(ex: SFTExample) -> str:
    return hashlib.sha256(f"{ex.task_id}\0{ex.response}".encode("utf-8")).hexdigest()


def filter_by_reward(examples: Sequence[SFTExample], threshold: float, cache: Path,
                     score: Callable[[list[SFTExample]], list[float | None]]) -> tuple[list[SFTExample], dict]:
    """Rejection-sampled SFT: keeps examples whose gated reward is at least `threshold`.

    Rewards are cached in `cache` (JSON Lines keyed by task and response), so a resumed
    or repeated run scores nothing twice; `score` returns None for an evaluator error,
    and such an example is dropped (counted apart: it is not the response's fault).
    """
    known: dict[str, float | None] = {}
    if cache.exists():
        for _, obj in iter_jsonl(cache):
            known[obj["key"]] = obj["reward"]
    todo = [ex for ex in examples if response_key(ex) not in known]
    if todo:
        rewards = score(list(todo))
        with open(cache, "a", encoding="utf-8") as f:
            for ex, r in zip(todo, rewards):
                known[response_key(ex)] = r
                f.write(json.dumps({"key": response_key(ex), "task_id": ex.task_id, "reward": r}) + "\n")
    rewards = [known[response_key(ex)] for ex in examples]
    kept = [ex for ex, r in zip(examples, rewards) if r is not None and r >= threshold]
    errors = sum(r is None for r in rewards)
    return kept, {"sft/below_reward_dropped": len(examples) - len(kept) - errors,
                  "sft/evaluator_error_dropped": errors}


def tokenize_examples(examples: Sequence[SFTExample], prompt_ids: Callable[[str], list[int]],
                      response_ids: Callable[[str], list[int]], seq_len: int
                      ) -> tuple[list[tuple[list[int], list[int]]], int]:
    """(prompt ids, response ids) of each example that fits in `seq_len`, and how many did not.

    An example that does not fit is skipped whole, never truncated.
    """
    out, too_long = [], 0
    for ex in examples:
        p, r = prompt_ids(ex.task_id), response_ids(ex.response)
        if len(p) + len(r) > seq_len:
            too_long += 1
        else:
            out.append((p, r))
    return out, too_long


class PromptStream:
    """Task ids of the training split from the grain pipeline, with checkpointable state.

    The state is saved with the checkpoint, so a resumed run sees exactly the
    prompts the uninterrupted run would have seen. Tasks for which `keep` is False
    (prompts that do not fit) are passed over.
    """

    def __init__(self, source, seed: int, state: dict | None = None,
                 keep: Callable[[str], bool] | None = None):
        from rcca_jax.data.tfds_tasks import task_stream

        self._it = iter(task_stream(source, seed).to_iter_dataset())
        self._keep = keep or (lambda _: True)
        if state:
            self._it.set_state(state)

    def next(self, n: int) -> list[str]:
        out = []
        while len(out) < n:
            tid = next(self._it)["id"]
            if self._keep(tid):
                out.append(tid)
        return out

    def state(self) -> dict:
        return self._it.get_state()


class IndexStream:
    """Endless, per-epoch reshuffled indices 0..n-1 (grain), with checkpointable state."""

    def __init__(self, n: int, seed: int, state: dict | None = None):
        import grain

        if n < 1:
            raise ValueError("IndexStream needs at least one item")
        self._it = iter(grain.MapDataset.range(n).shuffle(seed=seed).repeat(None).to_iter_dataset())
        if state:
            self._it.set_state(state)

    def next(self, k: int) -> list[int]:
        return [int(next(self._it)) for _ in range(k)]

    def state(self) -> dict:
        return self._it.get_state()
