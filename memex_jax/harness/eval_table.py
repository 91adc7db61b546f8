"""The evaluation table of ExpHarness: per-suite means with standard errors, the test-instance-
weighted average (as the paper's Table 2), ExpHarness minus each method on the same tasks, and
the per-task records a reader checks. Tasks are anything with `task_id` and `suite`."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def mean_and_se(values: Sequence[float]) -> tuple[float, float]:
  """Mean and its standard error (sample std / sqrt(n); 0 for a single value)."""
  x = np.asarray(values, np.float64)
  if x.size == 0:
    return float("nan"), float("nan")
  return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else 0.0


def table_rows(method: str, tasks: Sequence[Any], scores: Sequence[float],
               steps: Sequence[float | None]) -> dict[str, Any]:
  """One table row: per suite and the test-instance-weighted average over all tasks."""
  row: dict[str, Any] = {"label": method, "suites": {}}
  for suite in dict.fromkeys(t.suite for t in tasks):
    picked = [i for i, t in enumerate(tasks) if t.suite == suite]
    mean, se = mean_and_se([scores[i] for i in picked])
    agentic = [steps[i] for i in picked if steps[i] is not None]
    row["suites"][suite] = {"mean": mean, "se": se, "n": len(picked),
                            "mean_steps": float(np.mean(agentic)) if agentic else None}
  # Weighted by test instances: the mean over all tasks, as Table 2's average.
  row["average"], row["average_se"] = mean_and_se(scores)
  return row


def paired_differences(tasks: Sequence[Any], scores: dict[str, Sequence[float]],
                       reference: str = "expharness") -> dict[str, dict[str, Any]]:
  """`reference` minus each other method, task by task: per suite and over all tasks."""
  out = {}
  for method, other in scores.items():
    if method == reference:
      continue
    diff = np.asarray(scores[reference], np.float64) - np.asarray(other, np.float64)
    row = {}
    for suite in dict.fromkeys(t.suite for t in tasks):
      mean, se = mean_and_se(diff[[i for i, t in enumerate(tasks) if t.suite == suite]])
      row[suite] = {"mean": mean, "se": se}
    row["average"] = dict(zip(("mean", "se"), mean_and_se(diff)))
    out[method] = row
  return out


def markdown(rows: Sequence[dict[str, Any]]) -> str:
  """The table: one line per method, one column per suite, then the weighted average."""
  suites = list(dict.fromkeys(s for r in rows if "suites" in r for s in r["suites"]))
  lines = ["| method | " + " | ".join(suites) + " | weighted avg |",
           "|---" * (len(suites) + 2) + "|"]
  for r in rows:
    if "suites" not in r:
      lines.append(f"| {r['label']} | " + " | ".join("-" for _ in suites) + f" | {r['note']} |")
      continue
    cells = []
    for s in suites:
      cell = r["suites"][s]
      steps = "" if cell["mean_steps"] is None else f" ({cell['mean_steps']:.1f} steps)"
      cells.append(f"{cell['mean']:.3f} +- {cell['se']:.3f} (n={cell['n']}){steps}")
    lines.append(f"| {r['label']} | " + " | ".join(cells)
                 + f" | {r['average']:.3f} +- {r['average_se']:.3f} |")
  return "\n".join(lines)


def markdown_differences(differences: dict[str, dict[str, Any]]) -> str:
  """ExpHarness minus each method on the same tasks, +- the paired standard error."""
  if not differences:
    return ""
  columns = list(next(iter(differences.values())))
  lines = ["| expharness minus | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
  for method, row in differences.items():
    lines.append(f"| {method} | " + " | ".join(
        f"{row[k]['mean']:+.3f} +- {row[k]['se']:.3f}" for k in columns) + " |")
  return "\n".join(lines)


def task_records(method: str, tasks: Sequence[Any], results: Sequence[Any],
                 units: Sequence[Sequence[Any]], decisions: Sequence[Any] | None
                 ) -> list[dict[str, Any]]:
  """What a reader checks per task: the copilot's reply, the experiences shown, the answer."""
  out = []
  for i, (task, result) in enumerate(zip(tasks, results)):
    record = {"method": method, "task": task.task_id, "score": result.score,
              "response": result.response, "detail": result.detail,
              "experiences": [f"[{u.kind}] {u.text}" for u in units[i]]}
    if decisions is not None:
      record.update(copilot=decisions[i].text, R=decisions[i].restart, W=decisions[i].weight)
    out.append(record)
  return out
