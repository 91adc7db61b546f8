"""Greedy evaluations of several policies side by side: one table, paired differences, a figure.

  python -m launch.compare_evaluations --out results/memex_cpu/DATE/compare \\
      "step 186=/work/runs/proof11/eval_sft" "step 300=/work/runs/proof11/eval_sft_step300"

Each LABEL=FOLDER names an `experiments.evaluate` workdir (or a proof run's eval_* folder); its
`trajectories/<split>_<regime>.jsonl` are read, so an evaluation still running or cut short
counts the episodes it finished. FOLDER may instead be an OUT.json this command wrote (a
committed comparison under results/), whose policy named LABEL is taken as it was described
there: a policy whose workdir is gone can still be the base of a paired difference. Per
`<split>/<regime>` the table has a row per policy: the proof report's columns, the games won,
how episodes ended, the census of calls (compressions rejected, malformed turns and those
looping on a phrase) and the share of env replies that were the commonest one (ALFWorld's
"Nothing happens."); a second table counts each policy's env calls by command word and how many
of them got that commonest reply. The paired table takes each policy against the first over the
games both played (the same games when the evaluations share their settings): mean difference in
reward, success and score with the standard error of the differences.
Writes OUT.md, OUT.json (every number, with the command) and OUT.png.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import pathlib
import shlex
import sys
from typing import Any, Sequence

import numpy as np

from launch import proof_figures
from launch import proof_report
from memex_jax.agent import FINISH_REASONS
from memex_jax.agent import census as census_lib
from memex_jax.agent import records

PAIRED = ("reward", "success", "score")
PANELS = (("reward", "{:.3f}", "reward"), ("success", "{:.2f}", "success rate"),
          ("finish_context_overflow", "{:.2f}", "share ended by overflow"),
          ("num_compress", "{:.2f}", "CompressExperience / episode"),
          ("num_read", "{:.2f}", "ReadExperience / episode"),
          ("num_malformed", "{:.2f}", "malformed turns / episode"))


def parse_policy(text: str) -> tuple[str, pathlib.Path]:
  label, sep, folder = text.rpartition("=")
  if not sep or not label or not folder:
    raise argparse.ArgumentTypeError(f"expected LABEL=FOLDER, got {text!r}")
  return label, pathlib.Path(folder)


def read_evaluation(folder: pathlib.Path) -> dict[str, list[dict[str, Any]]]:
  """`<split>/<regime>` -> the episode records of an evaluation workdir."""
  found = proof_report.evaluation_records(folder)
  if not found:
    raise FileNotFoundError(f"{folder}: no trajectories/<split>_<regime>.jsonl with episodes")
  return found


def saved_policy(label: str, path: pathlib.Path) -> dict[str, dict[str, Any]]:
  """`<split>/<regime>` -> describe(..) of policy `label`, as an earlier OUT.json recorded it."""
  compared = json.loads(path.read_text())["compared"]
  found = {key: c["policies"][label] for key, c in compared.items() if label in c["policies"]}
  if not found:
    held = sorted({name for c in compared.values() for name in c["policies"]})
    raise FileNotFoundError(f"{path}: no policy {label!r}; it holds {held}")
  return found


def describe(played: list[dict[str, Any]]) -> dict[str, Any]:
  """The summary (every finish share filled in), the census and the per-game metrics."""
  summary = records.summarize([r["metrics"] for r in played])
  for reason in FINISH_REASONS:
    summary.setdefault(f"finish_{reason}", 0.0)
  census = census_lib.take_census(played)
  replies = sum(census.observations.values())
  commonest = census.observations.most_common(1)
  return {"summary": summary, "census": census.as_dict(),
          "commonest_reply": commonest[0][0] if commonest else None,
          "commonest_reply_share": commonest[0][1] / replies if commonest else 0.0,
          "per_game": {r.get("game", r["trajectory_id"]): r["metrics"] for r in played}}


def paired(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
  """Mean and standard error of other - base over the games both played, per PAIRED metric."""
  games = sorted(set(base) & set(other))
  out: dict[str, Any] = {"games": len(games)}
  for key in PAIRED:
    diff = np.asarray([float(other[g][key]) - float(base[g][key]) for g in games])
    out[key] = float(diff.mean()) if len(diff) else math.nan
    out[f"{key}_se"] = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else 0.0
  return out


def compare(policies: Sequence[tuple[str, pathlib.Path]]) -> dict[str, Any]:
  """{key: {"policies": {label: describe(..)}, "paired": {label: paired(first, label)}}}."""
  read = {label: saved_policy(label, source) if source.suffix == ".json" else
          {key: describe(played) for key, played in read_evaluation(source).items()}
          for label, source in policies}
  keys = list(dict.fromkeys(k for found in read.values() for k in found))
  out = {}
  for key in keys:
    described = {label: found[key] for label, found in read.items() if key in found}
    first, *rest = described
    out[key] = {"policies": described,
                "paired": {label: paired(described[first]["per_game"],
                                         described[label]["per_game"]) for label in rest}}
  return out


def _policy_row(label: str, d: dict[str, Any]) -> str:
  s, c = d["summary"], d["census"]
  ended = ", ".join(f"{reason} {n}" for reason, n in c["finish"].items())
  compress = c["calls"].get(census_lib.COMPRESS, 0)
  malformed = c["calls"].get(census_lib.MALFORMED, 0)
  cells = [proof_report.cell(s, *column[1:]) for column in proof_report.COLUMNS]
  return (f"| {label} | " + " | ".join(cells) + f" | {c['won']} | {ended} | "
          f"{c['errors'].get(census_lib.COMPRESS, 0)} of {compress} | "
          f"{malformed} ({c['looping']}) | {d['commonest_reply_share']:.2f} |")


def _command_table(policies: dict[str, Any], words: int = 8) -> list[str]:
  """Rows of env calls by command word (the `words` most called over all policies): calls /
  those whose reply was the policy's commonest one."""
  counted = {label: census_lib.command_replies(d["census"]["commands"], d["commonest_reply"])
             for label, d in policies.items() if d["commonest_reply"]}
  totals = collections.Counter()
  for rows in counted.values():
    totals.update({w: calls for w, (calls, _) in rows.items()})
  shown = [w for w, _ in totals.most_common(words)]
  if not shown:
    return []
  lines = ["Env calls by command word: calls / those that got the commonest reply:", "",
           "| policy | " + " | ".join(w or "(none)" for w in shown) + " |",
           "|---|" + "---:|" * len(shown)]
  for label, rows in counted.items():
    lines.append(f"| {label} | " + " | ".join("{} / {}".format(*rows.get(w, (0, 0)))
                                               for w in shown) + " |")
  return lines + [""]


def markdown(compared: dict[str, Any], command: str) -> str:
  parts = ["# Evaluations compared", "", f"Command: `{command}`", ""]
  for key, found in compared.items():
    split, _, regime = key.partition("/")
    parts += [f"## {split} ({regime} regime, greedy)", "",
              "| policy | " + " | ".join(c[0] for c in proof_report.COLUMNS) + " | won | "
              "ended by | compress rejected | malformed (looping) | commonest reply |",
              "|---|" + "---:|" * (len(proof_report.COLUMNS) + 5)]
    parts += [_policy_row(label, d) for label, d in found["policies"].items()]
    replies = {d["commonest_reply"] for d in found["policies"].values()} - {None}
    parts.append("")
    if replies:
      parts += ["Commonest env reply: " + ", ".join(repr(r[:60]) for r in sorted(replies)), ""]
    parts += _command_table(found["policies"])
    if found["paired"]:
      first = next(iter(found["policies"]))
      parts += [f"Paired over the games both played, minus {first}:", "",
                "| policy | games | " + " | ".join(f"Δ {k} ± SE" for k in PAIRED) + " |",
                "|---|---:|" + "---:|" * len(PAIRED)]
      for label, p in found["paired"].items():
        parts.append(f"| {label} | {p['games']} | " + " | ".join(
            f"{p[k]:+.3f} ± {p[k + '_se']:.3f}" for k in PAIRED) + " |")
      parts.append("")
  return "\n".join(parts)


def figure(compared: dict[str, Any], out: pathlib.Path) -> pathlib.Path:
  """A panel per PANELS metric, a bar group per `<split>/<regime>` and a bar per policy."""
  evaluations: dict[str, Any] = {}
  for key, found in compared.items():
    for label, d in found["policies"].items():
      evaluations.setdefault(label, {"results": {}})["results"][key] = d["summary"]
  return proof_figures.bar_panels(evaluations, list(compared), out.parent, out.name,
                                  "Greedy evaluations compared (± SE)", PANELS, columns=3)


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("policies", nargs="+", type=parse_policy, metavar="LABEL=FOLDER",
                      help="an evaluation workdir (or an earlier OUT.json holding policy LABEL) "
                           "and the label its row takes; the first is the base of the paired "
                           "differences")
  parser.add_argument("--out", required=True, help="path prefix of OUT.md, OUT.json, OUT.png")
  args = parser.parse_args(argv)
  command = "python -m launch.compare_evaluations " + shlex.join(sys.argv[1:] if argv is None
                                                                  else list(argv))
  try:
    compared = compare(args.policies)
  except FileNotFoundError as e:
    raise SystemExit(str(e)) from None
  out = pathlib.Path(args.out)
  out.parent.mkdir(parents=True, exist_ok=True)
  text = markdown(compared, command)
  out.with_suffix(".md").write_text(text)
  out.with_suffix(".json").write_text(json.dumps(
      {"command": command, "policies": {label: str(f) for label, f in args.policies},
       "compared": compared}, indent=1))
  figure(compared, out.with_suffix(".png"))
  print(text)


if __name__ == "__main__":
  main()
