"""The proof report's figures, after the Memex paper's Section 5, from `proof_report.collect`.

Fig. 2 rollout success and Fig. 3 total penalty over the MemexRL iterations; Fig. 4 greedy
success and peak working context and Fig. 5 CompressExperience / ReadExperience calls per
episode, zero-shot vs SFT (before RL) vs SFT+RL (after), per split; and the SFT loss curve.
A figure whose data the run did not produce says so on its canvas instead of being skipped.
"""

from __future__ import annotations

import pathlib
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
from matplotlib import ticker  # pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from memex_jax.runs import plots  # pylint: disable=g-import-not-at-top,wrong-import-position

POLICY_COLORS = {"zero-shot": "#9e9e9e", "SFT": "#1f77b4", "SFT+RL": "#ff7f0e"}
PENALTY_PARTS = (("p_context", "context"), ("p_redundancy", "redundancy"),
                 ("p_format", "format"))


def plot_all(report: dict[str, Any], keys: Sequence[str],
             out: str | pathlib.Path) -> list[pathlib.Path]:
  """Every figure of the report under `out`; `keys` are the `<split>/<regime>` evaluated."""
  return [rollout_success(report["rl_curve"], out), total_penalty(report["rl_curve"], out),
          success_and_context(report["evaluations"], keys, out),
          memory_calls(report["evaluations"], keys, out), sft_loss(report["sft_curve"], out)]


def rollout_success(rows: list[dict[str, Any]], out: str | pathlib.Path) -> pathlib.Path:
  """Fig. 2: mean rollout success per RL iteration, with its standard error as a band."""
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  points = [r for r in rows if "success" in r]
  if points:
    steps = [r["step"] for r in points]
    success = [r["success"] for r in points]
    ax.plot(steps, success, marker="o", color=POLICY_COLORS["SFT+RL"], label="rollout success")
    if all("success_se" in r for r in points):
      se = [r["success_se"] for r in points]
      ax.fill_between(steps, [max(s - e, 0.0) for s, e in zip(success, se)],
                      [min(s + e, 1.0) for s, e in zip(success, se)], alpha=0.2,
                      color=POLICY_COLORS["SFT+RL"], label="± standard error")
    ax.legend(loc="lower right")
  else:
    _note(ax, "no RL iterations logged")
  ax.set_ylim(-0.03, 1.03)
  _iteration_axis(ax, "rollout success rate")
  ax.set_title("Fig. 2: rollout success during MemexRL")
  return _save(fig, out, "fig2_rollout_success.png")


def total_penalty(rows: list[dict[str, Any]], out: str | pathlib.Path) -> pathlib.Path:
  """Fig. 3: the total penalty per RL iteration, with its three (negated) parts dashed."""
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  points = [r for r in rows if "penalty" in r]
  if points:
    steps = [r["step"] for r in points]
    ax.plot(steps, [r["penalty"] for r in points], marker="o", color="black", lw=2,
            label="total penalty")
    for key, name in PENALTY_PARTS:
      if all(key in r for r in points):
        ax.plot(steps, [-r[key] for r in points], marker=".", ls="--", label=f"− {name}")
    ax.legend(fontsize=8)
  else:
    _note(ax, "no RL iterations logged")
  _iteration_axis(ax, "penalty per episode (higher is better)")
  ax.set_title("Fig. 3: total penalty during MemexRL")
  return _save(fig, out, "fig3_total_penalty.png")


def success_and_context(evaluations: dict[str, Any], keys: Sequence[str],
                        out: str | pathlib.Path) -> pathlib.Path:
  """Fig. 4: greedy success and peak working context per split and policy (± SE)."""
  return bar_panels(evaluations, keys, out, "fig4_success_and_context.png",
                     "Fig. 4: greedy evaluation before (SFT) and after (SFT+RL) MemexRL",
                     (("success", "{:.2f}", "success rate"),
                      ("peak_working", "{:.0f}", "peak working context (tokens)")))


def memory_calls(evaluations: dict[str, Any], keys: Sequence[str],
                 out: str | pathlib.Path) -> pathlib.Path:
  """Fig. 5: CompressExperience and ReadExperience calls per episode per split and policy."""
  return bar_panels(evaluations, keys, out, "fig5_memory_calls.png",
                     "Fig. 5: memory-tool use before (SFT) and after (SFT+RL) MemexRL",
                     (("num_compress", "{:.2f}", "CompressExperience calls / episode"),
                      ("num_read", "{:.2f}", "ReadExperience calls / episode")))


def bar_panels(evaluations: dict[str, Any], keys: Sequence[str], out: str | pathlib.Path,
               name: str, title: str, panels: Sequence[tuple[str, str, str]],
               columns: int | None = None) -> pathlib.Path:
  """Grouped bars, one panel per (metric, value format, y label), `columns` panels a row (all
  in one row by default)."""
  columns = columns or len(panels)
  rows = -(-len(panels) // columns)
  fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4 * rows), squeeze=False)
  for ax, (metric, fmt, ylabel) in zip(axes.flat, panels):
    _grouped_bars(ax, evaluations, keys, metric, fmt)
    ax.set_ylabel(ylabel)
  for ax in axes.flat[len(panels):]:
    ax.set_visible(False)
  fig.suptitle(title)
  return _save(fig, out, name)


def sft_loss(curve: dict[str, list[dict[str, Any]]], out: str | pathlib.Path) -> pathlib.Path:
  """The SFT warm start: step loss (faint), its moving average, and the held-out loss."""
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  train = [r for r in curve["train"] if r.get("loss") is not None]
  heldout = [r for r in curve["heldout"] if r.get("heldout_loss") is not None]
  if train:
    steps = [r["step"] for r in train]
    ax.plot(steps, [r["loss"] for r in train], color="#1f77b4", alpha=0.3, label="step loss")
    smoothed = [(r["step"], r["smoothed_loss"]) for r in train
                if r.get("smoothed_loss") is not None]
    if smoothed:
      ax.plot(*zip(*smoothed), color="#1f77b4", label="smoothed train loss")
  if heldout:
    ax.plot([r["step"] for r in heldout], [r["heldout_loss"] for r in heldout], marker="o",
            color="#d62728", label="held-out loss")
  if train or heldout:
    # Log scale: after the first epoch the losses that tell policies apart differ by hundredths.
    ax.set_yscale("log")
    ax.legend()
  else:
    _note(ax, "no SFT steps logged")
  ax.set_xlabel("SFT step")
  ax.set_ylabel("demonstration loss (nats / token)")
  ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
  ax.grid(alpha=0.3)
  ax.set_title("SFT warm start")
  return _save(fig, out, "sft_loss.png")


def _grouped_bars(ax, evaluations: dict[str, Any], keys: Sequence[str], metric: str,
                  fmt: str) -> None:
  """Bars of `metric` (± its `_se`) with a group per `<split>/<regime>` and a bar per policy,
  each labelled with its value above its error bar; the legend sits above the axes."""
  policies = [p for p in evaluations if any(k in evaluations[p]["results"] for k in keys)]
  if not policies:
    _note(ax, "no evaluation found")
    return
  width, top, bottom = 0.8 / len(policies), 0.0, 0.0
  for i, policy in enumerate(policies):
    results = evaluations[policy]["results"]
    bars = [(g, results[k]) for g, k in enumerate(keys) if metric in results.get(k, {})]
    x = [g - 0.4 + width * (i + 0.5) for g, _ in bars]
    heights = [s[metric] for _, s in bars]
    errors = [s.get(metric + "_se", 0.0) for _, s in bars]
    unfinished = " (unfinished)" if evaluations[policy].get("unfinished") else ""
    ax.bar(x, heights, width * 0.92, yerr=errors, capsize=4, color=POLICY_COLORS.get(policy),
           label=policy + unfinished)
    for xi, h, e in zip(x, heights, errors):
      below = h < 0  # a negative bar's value goes under its error bar
      ax.annotate(fmt.format(h), (xi, h - e if below else h + e), xytext=(0, -2 if below else 2),
                  textcoords="offset points", ha="center", va="top" if below else "bottom",
                  fontsize=8)
      top, bottom = max(top, h + e), min(bottom, h - e)
  # Rewards are negative where only penalties were earned: the axis then reaches below 0.
  ax.set_ylim(1.15 * bottom, 1.15 * top if top > 0 else (0.0 if bottom < 0 else 1.0))
  ax.axhline(0, color="black", linewidth=0.6)
  ax.set_xticks(range(len(keys)), [k.replace("/", "\n") for k in keys])
  ax.grid(axis="y", alpha=0.3)
  ax.legend(fontsize=8, ncol=len(policies), loc="lower center", bbox_to_anchor=(0.5, 1.0),
            frameon=False)


def _iteration_axis(ax, ylabel: str) -> None:
  ax.set_xlabel("RL iteration")
  ax.set_ylabel(ylabel)
  ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
  ax.grid(alpha=0.3)


def _note(ax, text: str) -> None:
  ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="gray")


def _save(fig, out: str | pathlib.Path, name: str) -> pathlib.Path:
  fig.tight_layout()
  return plots.save_figure(fig, out, name)
