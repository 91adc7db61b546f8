r"""ExpHarness evaluation: the trained graph and copilot, frozen, against baselines and ablations.

  python -m experiments.expharness_eval --config experiments/configs/expharness.py \
      --config.workdir=/tmp/expharness

On the held-out tasks of each suite (disjoint from training; `expharness_setup.split_tasks`):
- no_memory: the executor alone, on the prompt of s_without (run here, not read from the
  s_without cache, so that agentic suites also report its mean steps);
- flat_top_k: the top-K units by cosine to the task, no copilot, no graph;
- expharness: the greedy copilot's (R, W) and the full retrieval on the trained graph;
- no_diffusion, no_utility_ranking: the same graph and copilot with that retrieval ablation;
- no_similarity_filter, flat: the graph and copilot of a run trained under that ablation
  (`config.eval.ablation_workdirs.<name>`); without one, the row says it was not run.
Nothing is updated. Output: <workdir>/eval/results.json, table.md and evaluation.png; the table
has mean score +- standard error per suite, the test-instance-weighted average, and mean steps
for agentic suites, then ExpHarness minus each other method on the same tasks (paired mean
difference +- its standard error). tasks.jsonl holds one line per method and task: the copilot's
reply and controls, the experiences shown, the executor's response and its score.
"""

from __future__ import annotations

import json
import os
from typing import Any

from absl import app
from absl import flags
import jax
import numpy as np
from ml_collections import config_flags
import tqdm

from experiments import expharness_setup as setup
from memex_jax import harness
from memex_jax import rl
from memex_jax import runs
from memex_jax.harness import eval_table
from memex_jax.harness import persistence
from memex_jax.harness import pipeline
from memex_jax.harness.copilot import Copilot, CopilotConfig
from memex_jax.models.policy import load_policy
from memex_jax.runs import plots

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/expharness.py")
RETRIEVAL_ABLATIONS = ("no_diffusion", "no_utility_ranking")
CONSTRUCTION_ABLATIONS = ("no_similarity_filter", "flat")


def _load_run(c: Any, workdir: str, encoder: Any) -> tuple[Any, harness.ExperienceGraph]:
  """(copilot policy params, graph) of a training run's latest checkpoint."""
  model_cfg, params, _ = runs.from_section(load_policy, c.copilot_model, "config.copilot_model")
  optimizer = runs.from_section(rl.actor_critic_optimizer, c.optim, "config.optim")
  head = rl.init_value_head(model_cfg.embed_dim, jax.random.PRNGKey(c.seed))
  target = rl.TrainState.create(rl.actor_critic_params(params, head), optimizer,
                                jax.random.PRNGKey(c.seed))
  with runs.Checkpointer(f"{workdir}/checkpoints") as ckpt:
    restored = runs.restore_latest(ckpt, target)
  if restored is None:
    raise SystemExit(f"{workdir}/checkpoints holds no checkpoint; train first")
  try:
    graph = persistence.load(setup.graph_path(workdir, restored.step), encoder.name)
  except persistence.GraphFileError as error:
    raise SystemExit(f"cannot evaluate {workdir}: {error}") from None
  return restored.state.params[rl.ppo.POLICY], graph


@runs.exits_on_config_error
def main(argv) -> None:
  del argv
  c = _CONFIG.value
  runs.quiet_library_logs()
  encoder = harness.TextEncoder()
  _, eval_tasks = setup.split_tasks(c)
  executor = setup.build_executor(c)
  model_cfg, params, tokenizer = runs.from_section(load_policy, c.copilot_model,
                                                   "config.copilot_model")
  copilot = Copilot(setup.copilot_sampler(c, model_cfg, params, tokenizer, c.batch_size, c.seed),
                    runs.from_section(CopilotConfig, c.copilot, "config.copilot"))
  runs_by_name = {"full": c.workdir, **{k: v for k, v in c.eval.ablation_workdirs.items() if v}}
  loaded, decided = {}, {}  # per training run: (policy, graph), the greedy copilot's decisions
  queries = encoder.encode([t.text for t in eval_tasks])
  rows, scores, records = [], {}, []
  for method in tqdm.tqdm(c.eval.methods, desc="expharness_eval"):
    run = "full" if method in ("flat_top_k", "expharness", *RETRIEVAL_ABLATIONS) else method
    if method == "no_memory":
      results = pipeline.safe_solve(executor.executor, eval_tasks, [()] * len(eval_tasks))
      steps = [r.steps if t.agentic else None for t, r in zip(eval_tasks, results)]
      scores[method] = [r.score for r in results]
      rows.append(dict(eval_table.table_rows(method, eval_tasks, scores[method], steps),
                       failures=sum(r.error for r in results)))
      records += eval_table.task_records(method, eval_tasks, results, [()] * len(eval_tasks),
                                         None)
    elif run not in runs_by_name:
      rows.append({"label": method, "note": f"not run: train with --config.ablation={method} "
                   f"and pass --config.eval.ablation_workdirs.{method}=<its workdir>"})
    else:
      if run not in loaded:
        loaded[run] = _load_run(c, runs_by_name[run], encoder)
      policy, graph = loaded[run]
      ablation = {"expharness": "full", "flat_top_k": "flat"}.get(method, method)
      _, retrieval_cfg = setup.harness_configs(c, ablation, encoder.dim)
      fallbacks, decisions = 0, None
      if method == "flat_top_k":  # no copilot: similarity alone
        controls = [(0, 0)] * len(eval_tasks)
      else:  # greedy, so one decoding serves every method on the same run
        if run not in decided:
          copilot.sampler.params = policy
          decided[run] = []
          for first in range(0, len(eval_tasks), c.batch_size):
            chunk = eval_tasks[first:first + c.batch_size]
            decided[run] += copilot.decide([t.text for t in chunk], [t.family for t in chunk],
                                           greedy=True)
        decisions = decided[run]
        controls = [(d.restart, d.weight) for d in decisions]
        fallbacks = sum(not d.parsed for d in decisions)
      slots = pipeline.retrieve_slots(graph, queries, [r for r, _ in controls],
                                      [w for _, w in controls], retrieval_cfg)
      results = pipeline.solve_with_slots(executor.executor, graph, eval_tasks, slots)
      steps = [r.steps if t.agentic else None for t, r in zip(eval_tasks, results)]
      scores[method] = [r.score for r in results]
      rows.append(dict(eval_table.table_rows(method, eval_tasks, scores[method], steps),
                       failures=sum(r.error for r in results), fallbacks=fallbacks,
                       retrieved_per_task=float(np.mean([len(s) for s in slots]))))
      records += eval_table.task_records(method, eval_tasks, results,
                                         [graph.units_at(s) for s in slots], decisions)
    row = rows[-1]
    tqdm.tqdm.write(f"{method}: " + (f"{row['average']:.3f} +- {row['average_se']:.3f}"
                                     if "average" in row else row["note"]))
  out = os.path.join(c.workdir, "eval")
  os.makedirs(out, exist_ok=True)
  differences = (eval_table.paired_differences(eval_tasks, scores) if "expharness" in scores
                 else {})
  with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
    json.dump({"tasks": [t.task_id for t in eval_tasks], "rows": rows,
               "expharness_minus": differences}, f, indent=1)
  with open(os.path.join(out, "tasks.jsonl"), "w", encoding="utf-8") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
  table = eval_table.markdown(rows) + "\n\n" + eval_table.markdown_differences(differences)
  with open(os.path.join(out, "table.md"), "w", encoding="utf-8") as f:
    f.write(table + "\n")
  plotted = [r for r in rows if "average" in r]
  plots.plot_bars(plotted, "average", "average_se",
                  "held-out score (test-instance-weighted, +- SE)", out, "evaluation.png")
  print(table)
  print(f"results: {out}/results.json, {out}/table.md, {out}/evaluation.png")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
