"""PNG plots of a run, in the spirit of the Memex paper's Figures 2-5.

Training curves (rollout success, total penalty, working context, memory-tool calls per episode
against the iteration) and an evaluation bar chart per memory regime.
"""

from __future__ import annotations

import pathlib
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from memex_jax.runs import log as run_log  # pylint: disable=g-import-not-at-top

TRAINING_PANELS = (
    ("rollout success", ("success",)),
    ("total penalty", ("penalty",)),
    ("working context (tokens)", ("peak_working", "mean_working")),
    ("memory calls per episode", ("num_compress", "num_read")),
)


def plot_training(metrics_path: str | pathlib.Path, out_dir: str | pathlib.Path,
                  panels: Sequence[tuple[str, Sequence[str]]] = TRAINING_PANELS) -> pathlib.Path:
  """One panel of training curves per (title, metric keys) from metrics.jsonl (Memex's four by
  default) -> out_dir/training.png."""
  records = run_log.read_log(metrics_path, kind="train")
  fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
  for ax, (title, keys) in zip(axes, panels):
    for key in keys:
      points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
      if points:
        ax.plot(*zip(*points), marker="o", label=key)
    ax.set_title(title)
    ax.set_xlabel("iteration")
    ax.grid(alpha=0.3)
    if len(keys) > 1:
      ax.legend()
  fig.tight_layout()
  return save_figure(fig, out_dir, "training.png")


def plot_evaluation(rows: Sequence[dict[str, Any]], out_dir: str | pathlib.Path,
                    name: str = "evaluation.png") -> pathlib.Path:
  """Bars of success (with standard errors), peak working context and memory calls per regime.

  Each row holds `label`, `success`, `success_se`, `peak_working`, `num_compress`, `num_read`.
  """
  labels = [r["label"] for r in rows]
  fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
  axes[0].bar(labels, [r["success"] for r in rows], yerr=[r.get("success_se", 0) for r in rows],
              capsize=4)
  axes[0].set_title("success rate")
  # A rate lives in [0, 1]; with every bar at 0 matplotlib would centre the axis on it.
  top = max(r["success"] + r.get("success_se", 0) for r in rows)
  axes[0].set_ylim(0, min(1.05, max(0.1, 1.15 * top)))
  axes[1].bar(labels, [r["peak_working"] for r in rows])
  axes[1].set_title("peak working context (tokens)")
  width = 0.4
  x = range(len(rows))
  axes[2].bar([i - width / 2 for i in x], [r["num_compress"] for r in rows], width,
              label="compress")
  axes[2].bar([i + width / 2 for i in x], [r["num_read"] for r in rows], width, label="read")
  axes[2].set_xticks(list(x), labels)
  axes[2].set_title("memory calls per episode")
  axes[2].legend()
  for ax in axes:
    ax.tick_params(axis="x", labelrotation=20)
  fig.tight_layout()
  return save_figure(fig, out_dir, name)


def plot_bars(rows: Sequence[dict[str, Any]], value: str, error: str, title: str,
              out_dir: str | pathlib.Path, name: str) -> pathlib.Path:
  """One bar per row (`label`), height `row[value]` with `row[error]` error bars."""
  fig, ax = plt.subplots(figsize=(1.2 * len(rows) + 2.5, 3.8))
  ax.bar([r["label"] for r in rows], [r[value] for r in rows],
         yerr=[r.get(error, 0.0) for r in rows], capsize=4)
  ax.set_title(title)
  ax.tick_params(axis="x", labelrotation=30)
  ax.grid(axis="y", alpha=0.3)
  fig.tight_layout()
  return save_figure(fig, out_dir, name)


def save_figure(fig, out_dir: str | pathlib.Path, name: str) -> pathlib.Path:
  """Writes `fig` to out_dir/name (creating out_dir), closes it and returns the path."""
  path = pathlib.Path(out_dir) / name
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
