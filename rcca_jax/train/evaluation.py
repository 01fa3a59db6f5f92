"""Held-out evaluation as a benchmark harness: sample, score, and write the tables.

The held-out tasks (those whose prompts fit, the first `eval.max_tasks` by id) are
answered `eval.samples` times each at the sampling temperature (the quantity RL
maximises), or once greedily when it is 0, and scored without localization. Every
process answers its contiguous share (padded to the same number of sampler calls)
and the records are gathered. The keys depend only on a task's position in the
list, so evaluations after SFT and after RL draw with common random numbers.

Written under `<workdir>/eval/<tag>`: `records.jsonl`, `report.json` and
`report.md` (`evaluators.leaderboard`: mean gated reward, InteractScience's
Overall / Average / Perfect, the judged share; by difficulty and by domain), and
TensorBoard scalars `eval/<tag>/...`.
"""

from __future__ import annotations

import dataclasses
import json
import math

import jax

from evaluators import leaderboard
from evaluators.records import dumps_record
from rcca_jax.models import Ling
from rcca_jax.train import multihost

EVAL_KEY_OFFSET = 7  # the evaluation key is PRNGKey(seed + 7): apart from the training keys


def eval_task_ids(run) -> list[str]:
    ids = sorted(t for t in run.data.eval_ids if run.fits(t))
    if not ids:
        raise ValueError("no held-out task to evaluate on (config.data.eval_fraction / "
                         f"eval_source; {run.counts.get('tasks/held_out_prompt_too_long', 0)} "
                         "held-out prompts do not fit)")
    m = run.cfg.eval.max_tasks
    return ids[:m] if m else ids


def _compact(rec: dict) -> dict:
    """The fields the tables need."""
    return {"task_id": rec.get("task_id"), "status": rec.get("status"), "reward": rec.get("reward"),
            "gate": rec.get("gate"), "rubrics": [{"id": v.get("id"), "verdict": v.get("verdict")}
                                                 for v in rec.get("rubrics") or ()]}


def evaluate(run, model: Ling, tag: str, step: int) -> dict:
    """Samples and scores the held-out tasks; writes and returns the report.

    Returns:
      `evaluators.leaderboard.report` of the answers (keys "all", "by_difficulty",
      "by_domain").
    """
    from rcca_jax.train.rl import sample_and_score

    cfg = run.cfg
    run.yield_cpu()
    ids = eval_task_ids(run)
    per = math.ceil(len(ids) / run.processes)
    mine = ids[run.process * per:(run.process + 1) * per]
    real = len(mine)
    mine = mine + [ids[-1]] * (per - real)  # equal sampler calls on every process; not scored
    n = cfg.eval.samples
    scfg = dataclasses.replace(run.sampler, group_size=max(n, 1),
                               temperature=run.sampler.temperature if n else 0.0)
    key = jax.random.PRNGKey(cfg.seed + EVAL_KEY_OFFSET)
    _, _, scored, timing = sample_and_score(run, model, mine, key, scfg, run.process * per,
                                            localize=False)
    records = scored.records[:real * max(n, 1)]
    # Whole records, as their lines, so process 0 writes every answer (a shared workdir has
    # one file; a process writing only its own would leave the others' answers unwritten).
    lines = [ln for part in multihost.allgather_objects([dumps_record(r) for r in records])
             for ln in part]
    gathered = [_compact(json.loads(ln)) for ln in lines]
    report = leaderboard.report(gathered, run.data.tasks)
    report["task_rewards"] = leaderboard.task_rewards(gathered)
    report["meta"] = {"tag": tag, "step": step, "tasks": len(ids), "samples": max(n, 1),
                      "greedy": n == 0, "answers": len(gathered), **timing}
    if run.process == 0:
        _write(run, tag, report, lines)
    run.log.scalars(step, {f"eval/{tag}/{k}": v for k, v in report["all"].items()
                           if isinstance(v, (int, float))})
    for part in ("by_difficulty", "by_domain"):
        run.log.scalars(step, {f"eval/{tag}/{part}/{g}/Overall": f["Overall"]
                               for g, f in report[part].items()})
    a = report["all"]
    run.say(f"eval {tag}: reward {a['reward']:.3f} (se {a['reward_se']:.3f}), Overall {a['Overall']:.3f}, "
            f"Average {a['Average']:.3f}, Perfect {a['Perfect']:.3f} over {len(gathered)} answers "
            f"to {len(ids)} held-out tasks ({a['errors']} evaluator errors)")
    return report


def _write(run, tag: str, report: dict, lines: list[str]) -> None:
    out = run.workdir / "eval" / tag
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "report.md").write_text(f"# Held-out evaluation: {tag} (step {report['meta']['step']})\n\n"
                                   + leaderboard.report_markdown(tag, report) + "\n")
    with open(out / "records.jsonl", "w", encoding="utf-8") as f:
        f.writelines(ln + "\n" for ln in lines)  # every process's answers, in task order
