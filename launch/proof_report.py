"""The proof run's report: one table per split, stage times, and the Memex paper's Figures 2-5.

  python -m launch.proof_report WORKDIR [--out results/memex_cpu]

WORKDIR is the one given to launch/memex_proof.sh: `stages.json` (stage times and command),
`demos/summary.json` (the demonstration set), `sft/metrics.jsonl`, `eval_zero_shot/`, `eval_sft/`, `eval_rl/`
(each an evaluation.json) and `rl/metrics.jsonl`. Whatever a cut-short run did not write is left
out of the report (a policy's row, a stage, a curve), never guessed; an evaluation stopped before
its evaluation.json gets the row of the episodes it finished (its trajectories), marked
unfinished. Writes OUT/report.json (every
number the table and figures show), OUT/table.md, the figures (launch/proof_figures.py) and prints
the table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any, Sequence

from launch import proof_figures
from memex_jax.agent import config as agent_config
from memex_jax.agent import records
from memex_jax.runs import log as run_log

# (row label, evaluation folder): the policy before SFT, after SFT (before RL) and after RL.
POLICIES = (("zero-shot", "eval_zero_shot"), ("SFT", "eval_sft"), ("SFT+RL", "eval_rl"))
RL_KEYS = ("success", "success_se", "reward", "penalty", "p_context", "p_redundancy", "p_format",
           "num_compress", "num_read", "peak_working")

# (header, summary key, format); a key with a `_se` entry is shown as mean ± SE when `with_se`.
COLUMNS = (
    ("episodes", "episodes", "{:.0f}", False),
    ("success ± SE", "success", "{:.3f}", True),
    ("goal conditions ± SE", "score", "{:.3f}", True),  # partial credit: a win counts 1
    ("reward ± SE", "reward", "{:.3f}", True),
    ("mean steps", "steps", "{:.1f}", False),
    ("peak working", "peak_working", "{:.0f}", False),
    ("mean working", "mean_working", "{:.0f}", False),
    ("compress / ep", "num_compress", "{:.2f}", False),
    ("read / ep", "num_read", "{:.2f}", False),
    ("p_context", "p_context", "{:.3f}", False),
    ("p_redundancy", "p_redundancy", "{:.3f}", False),
    ("p_format", "p_format", "{:.3f}", False),
)


def read_json(path: pathlib.Path) -> Any:
  """The file's JSON, None if it is missing; a malformed file is an error naming it."""
  if not path.exists():
    return None
  try:
    return json.loads(path.read_text())
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not JSON ({e})") from None


def read_metrics(path: pathlib.Path, kind: str, keys: Sequence[str]) -> list[dict[str, Any]]:
  """`step` and those of `keys` present, of each `kind` record in a metrics.jsonl ([] if none)."""
  if not path.exists():
    return []
  return [{"step": r["step"], **{k: r[k] for k in keys if k in r}}
          for r in run_log.read_log(path, kind=kind)]


def evaluation_records(folder: pathlib.Path) -> dict[str, list[dict[str, Any]]]:
  """`<split>/<regime>` -> the episode records of an evaluation's trajectories (none: {})."""
  found = {}
  for path in sorted((folder / "trajectories").glob("*.jsonl")):
    regime = next((m for m in agent_config.MODES if path.stem.endswith("_" + m)), None)
    played = records.read_records(path)
    if regime is not None and played:
      found[f"{path.stem.removesuffix('_' + regime)}/{regime}"] = played
  return found


def finished_episodes(folder: pathlib.Path) -> dict[str, Any]:
  """`<split>/<regime>` -> the summary of the episodes an evaluation's trajectories hold."""
  return {key: records.summarize([r["metrics"] for r in played])
          for key, played in evaluation_records(folder).items()}


def stage_commands(stages: dict[str, Any]) -> dict[str, list[str]]:
  """{command: the stages it ran}, in the order they ran; a stage recorded without its command
  (a run from before stages kept theirs) ran under the record's."""
  commands = {}
  for s in stages["stages"]:
    commands.setdefault(s.get("command") or stages.get("command"), []).append(s["name"])
  return commands


def collect(workdir: str | pathlib.Path) -> dict[str, Any]:
  """Everything the report shows, read from a proof WORKDIR."""
  work = pathlib.Path(workdir)
  if not work.is_dir():
    raise FileNotFoundError(f"{work}: no such proof workdir")
  stages = read_json(work / "stages.json") or {"stages": [], "command": None}
  evaluations = {}
  for label, folder in POLICIES:
    found = read_json(work / folder / "evaluation.json")
    if found is not None:
      evaluations[label] = {"checkpoint": found.get("checkpoint"), "results": found["results"]}
    elif played := finished_episodes(work / folder):
      evaluations[label] = {"checkpoint": None, "results": played, "unfinished": True}
  metrics = work / "sft" / run_log.METRICS_FILE
  return {
      "workdir": str(work),
      "command": stages.get("command"),
      "commands": stage_commands(stages),
      "stages": stages["stages"],
      "total_seconds": sum(s["seconds"] for s in stages["stages"]),
      "demonstrations": read_json(work / "demos" / "summary.json"),
      "evaluations": evaluations,
      "rl_curve": read_metrics(work / "rl" / run_log.METRICS_FILE, "train", RL_KEYS),
      "sft_curve": {"train": read_metrics(metrics, "sft", ("loss", "smoothed_loss")),
                    "heldout": read_metrics(metrics, "sft_heldout", ("heldout_loss",))},
  }


def evaluated_keys(report: dict[str, Any]) -> list[str]:
  """The `<split>/<regime>` keys any policy was evaluated on, in first-seen order."""
  keys = {}
  for evaluation in report["evaluations"].values():
    keys.update(dict.fromkeys(evaluation["results"]))
  return list(keys)


def cell(summary: dict[str, Any], key: str, fmt: str, with_se: bool) -> str:
  if key not in summary:
    return "-"
  text = fmt.format(summary[key])
  return f"{text} ± {fmt.format(summary[key + '_se'])}" if with_se else text


def split_table(report: dict[str, Any], key: str) -> str:
  """A Markdown table of one `<split>/<regime>`: a row per evaluated policy."""
  lines = ["| policy | " + " | ".join(c[0] for c in COLUMNS) + " |",
           "|---|" + "---:|" * len(COLUMNS)]
  for label, evaluation in report["evaluations"].items():
    summary = evaluation["results"].get(key)
    if summary is not None:
      name = f"{label} (unfinished)" if evaluation.get("unfinished") else label
      lines.append(f"| {name} | " + " | ".join(cell(summary, *c[1:]) for c in COLUMNS) + " |")
  return "\n".join(lines)


def stage_table(report: dict[str, Any]) -> str:
  lines = ["| stage | seconds | minutes |", "|---|---:|---:|"]
  for s in report["stages"]:
    lines.append(f"| {s['name']} | {s['seconds']:.1f} | {s['seconds'] / 60:.1f} |")
  total = report["total_seconds"]
  lines.append(f"| **total** | **{total:.1f}** | **{total / 60:.1f}** |")
  return "\n".join(lines)


def markdown(report: dict[str, Any]) -> str:
  """table.md: the greedy evaluations per split, the demonstration set and the stage times."""
  parts = ["# Memex proof run", ""]
  commands = report.get("commands") or {}
  if len(commands) > 1:
    parts += ["Commands (the run went on from stages done under other settings):", ""]
    parts += [f"- {', '.join(names)}: `{command}`" for command, names in commands.items()]
    parts.append("")
  elif report["command"]:
    parts += [f"Command: `{report['command']}`", ""]
  for key in evaluated_keys(report):
    split, _, regime = key.partition("/")
    parts += [f"## {split} ({regime} regime, greedy)", "", split_table(report, key), ""]
  if not report["evaluations"]:
    parts += [f"No evaluation.json under {report['workdir']}.", ""]
  demos = report["demonstrations"]
  if demos:
    scalars = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in demos.items() if isinstance(v, (int, float)))
    parts += ["## SFT demonstrations", "", scalars, ""]
  parts += ["## Stage times", "", stage_table(report), ""]
  return "\n".join(parts)


def write_report(workdir: str | pathlib.Path, out: str | pathlib.Path) -> str:
  """Writes report.json, table.md and the figures under `out`; returns the table."""
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  report = collect(workdir)
  (out / "report.json").write_text(json.dumps(report, indent=1))
  text = markdown(report)
  (out / "table.md").write_text(text)
  proof_figures.plot_all(report, evaluated_keys(report), out)
  return text


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("workdir", help="the WORKDIR given to launch/memex_proof.sh")
  parser.add_argument("--out", default="results/memex_cpu", help="where the report goes")
  args = parser.parse_args(argv)
  print(write_report(args.workdir, args.out))
  print(f"wrote {args.out}/report.json, table.md and the figures")


if __name__ == "__main__":
  main()
