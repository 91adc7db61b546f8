"""The proof run's table: per-iteration rollout metrics and greedy success before/after RL.

  python -m launch.proof_report WORKDIR      # WORKDIR as given to launch/memex_proof.sh
"""

from __future__ import annotations

import json
import pathlib
import sys

from memex_jax.runs import log as run_log

ITERATION_KEYS = ("reward", "success", "num_compress", "num_read", "peak_working", "groups_kept")


def report(workdir: str | pathlib.Path) -> str:
  work = pathlib.Path(workdir)
  lines = ["iteration  " + "  ".join(f"{k:>13s}" for k in ITERATION_KEYS)]
  for r in run_log.read_log(work / "rl" / run_log.METRICS_FILE, kind="train"):
    lines.append(f"{r['step']:9d}  " + "  ".join(f"{float(r.get(k, float('nan'))):13.3f}"
                                                 for k in ITERATION_KEYS))
  lines.append("")
  for name in ("eval_before", "eval_after"):
    results = json.loads((work / name / "evaluation.json").read_text())["results"]
    for key, s in results.items():
      lines.append(f"{name:11s} {key:22s} success {s['success']:.3f} ± {s['success_se']:.3f}  "
                   f"compress {s['num_compress']:.2f}  read {s['num_read']:.2f}  "
                   f"peak working {s['peak_working']:.0f}")
  return "\n".join(lines)


if __name__ == "__main__":
  if len(sys.argv) != 2:
    sys.exit("usage: python -m launch.proof_report WORKDIR")
  print(report(sys.argv[1]))
