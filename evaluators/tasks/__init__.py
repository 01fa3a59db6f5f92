"""Tasks: the task format (`format`: requests with rubrics and probes, read from
``tasks.jsonl``) and the task family (`family`: a generator of verifiable tasks with
reference answers, pure CPU, no JAX). The format's public names are importable from
here."""

from evaluators.tasks.format import (IMPORTANCES, KINDS, FormatError, Rubric, Task,
                                     iter_jsonl, load_responses, load_tasks, parse_task)

__all__ = ["IMPORTANCES", "KINDS", "FormatError", "Rubric", "Task", "iter_jsonl",
           "load_responses", "load_tasks", "parse_task"]
