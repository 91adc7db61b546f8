r"""ExpHarness training: the retrieval copilot learns by PPO while the experience graph evolves.

  python -m experiments.expharness_ppo --config experiments/configs/expharness.py \
      --config.workdir=/tmp/expharness [--config.num_iterations=N]

Before the first step, cold start: the frozen executor solves a sample of training tasks
without experience, and their summaries seed the graph. One iteration, as `iteration` reads:
B training tasks -> the copilot samples <search>R:W</search> per task -> retrieval on the graph
-> the frozen executor with those experiences (s_with) and, cached per task, without
(s_without) -> r = (s_with - s_without) + eta * s_with -> PPO (GAE on the value head, KL to the
initial copilot) on the copilot's replies -> utility EMA on every retrieved node, summaries of
the finished tasks inserted -> metrics, checkpoint (copilot + value head + optimizer state,
graph, s_without cache), plots. A killed run resumes bit for bit from its last checkpoint.

Multi-host (one process per host, `parallel.maybe_initialize`): each host solves its share of a
batch; samples and feedback are all-gathered and every host applies them in the same order, so
copilot and graph stay identical everywhere.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import time
from typing import Any

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import config_flags
import tqdm

from experiments import expharness_setup as setup
from memex_jax import harness
from memex_jax import parallel
from memex_jax import rl
from memex_jax import runs
from memex_jax.harness import cold_start as cold_start_lib
from memex_jax.harness import feedback as feedback_lib
from memex_jax.harness import persistence
from memex_jax.harness import pipeline
from memex_jax.harness.copilot import Copilot, CopilotConfig
from memex_jax.harness.score_cache import NoMemoryScores
from memex_jax.harness.summarizer import Summarizer, SummarizerConfig
from memex_jax.models.policy import load_policy
from memex_jax.runs import plots

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/expharness.py")
PANELS = (("copilot reward", ("reward",)), ("executor score", ("s_with", "s_without")),
          ("copilot controls", ("R_mean", "W_mean")), ("graph size", ("graph_size",)),
          ("fallbacks per batch", ("fallbacks",)),
          ("seconds per iteration", ("time/executor_s", "time/no_memory_s", "time/summarizer_s",
                                     "time/copilot_s", "time/retrieval_s", "time/learn_s")),
          ("harness share of an iteration", ("harness_fraction",)))
COUNTERS = ("fallbacks", "tasks_failed", "insertions", "duplicates", "evictions")


def _sample_record(decision: Any, reward: float) -> dict[str, Any]:
  return {"prompt": list(decision.prompt_ids), "reply": list(decision.reply_ids),
          "logprobs": list(decision.reply_logprobs), "reward": reward}


def _samples(records: list[dict[str, Any]], first_id: int) -> list[rl.Sample]:
  """Learner samples of the gathered records, numbered from `first_id` in gathered order."""
  out = []
  for i, r in enumerate(records):
    n, m = len(r["prompt"]), len(r["reply"])
    out.append(rl.Sample(
        token_ids=np.asarray(r["prompt"] + r["reply"], np.int32),
        loss_mask=np.r_[np.zeros(n, np.int32), np.ones(m, np.int32)],
        rollout_logprobs=np.r_[np.zeros(n), r["logprobs"]].astype(np.float32),
        trajectory_id=first_id + i, group_id=first_id + i, reward=float(r["reward"])))
  return out


def _write_rollouts(path: str, ro: pipeline.Rollout) -> None:
  """One JSON line per task: what the copilot wrote and chose, what was retrieved and scored."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    for task, d, slots, s_with, s_without, reward in zip(ro.tasks, ro.decisions, ro.slots,
                                                          ro.s_with, ro.s_without, ro.rewards):
      f.write(json.dumps({"task": task.task_id, "copilot": d.text, "R": d.restart,
                          "W": d.weight, "parsed": d.parsed, "slots": list(slots),
                          "s_with": s_with, "s_without": s_without, "reward": reward}) + "\n")


@runs.exits_on_config_error
def main(argv) -> None:
  del argv
  c = _CONFIG.value
  runs.quiet_library_logs()
  parallel.maybe_initialize()
  host, hosts = jax.process_index(), jax.process_count()
  log = runs.RunLog(c.workdir) if host == 0 else None
  if c.ablation not in harness.ABLATIONS:
    raise runs.ConfigError(f"config.ablation={c.ablation!r}; expected one of {harness.ABLATIONS}")
  encoder = harness.TextEncoder()
  graph_cfg, retrieval_cfg = setup.harness_configs(c, c.ablation, encoder.dim)
  train_tasks, _ = setup.split_tasks(c)
  executor = setup.build_executor(c)
  summarizer = Summarizer(executor.summarizer_model, runs.from_section(
      SummarizerConfig, c.summarizer, "config.summarizer"))
  cache = NoMemoryScores(setup.scores_path(c.workdir), executor.key)

  model_cfg, params, tokenizer = runs.from_section(load_policy, c.copilot_model,
                                                   "config.copilot_model")
  loss_cfg = runs.from_section(rl.LossConfig, c.loss, "config.loss",
                               temperature=c.copilot.temperature)
  value_cfg = runs.from_section(rl.ValueLossConfig, c.value_loss, "config.value_loss")
  advantages = runs.from_section(rl.token_advantage_fn, c.advantage, "config.advantage")
  optimizer = runs.from_section(rl.actor_critic_optimizer, c.optim, "config.optim")
  head = rl.init_value_head(model_cfg.embed_dim, jax.random.PRNGKey(c.seed))
  state = rl.TrainState.create(rl.actor_critic_params(params, head), optimizer,
                               jax.random.PRNGKey(c.seed))
  ref_params = jax.tree.map(jnp.copy, params)  # the initial copilot, the KL's reference
  step_fn = functools.partial(rl.jit_actor_critic_step, model_cfg, loss_cfg, value_cfg, optimizer)
  fill_old = functools.partial(rl.fill_old_logprobs_and_values, model_cfg,
                               temperature=loss_cfg.temperature)
  fill_ref = functools.partial(rl.fill_logprobs, model_cfg, field="ref_logprobs",
                               temperature=loss_cfg.temperature)
  per_host = -(-c.batch_size // hosts)
  copilot = Copilot(setup.copilot_sampler(c, model_cfg, params, tokenizer, per_host, c.seed + 1),
                    runs.from_section(CopilotConfig, c.copilot, "config.copilot"))

  ckpt = runs.Checkpointer(f"{c.workdir}/checkpoints", max_to_keep=c.checkpoint.keep)
  restored = runs.restore_latest(ckpt, state)
  totals: collections.Counter[str] = collections.Counter()
  if restored is None:
    first_iteration = 0
    graph = harness.ExperienceGraph(graph_cfg, encoder.name)
    if log is not None:  # minutes with no other output: say what is going on
      print(f"cold start: {c.tasks.cold_start} training tasks solved without experience, then "
            "summarized")
    start = time.perf_counter()
    entries, started = cold_start_lib.cold_start(train_tasks[:c.tasks.cold_start][host::hosts],
                                                 executor.executor, summarizer, encoder, cache)
    stats = feedback_lib.apply_feedback(graph, feedback_lib.gather_feedback(entries))
    if log is not None:
      print(f"cold start: {stats.insertions} units inserted ({started['cold_start_failed']} "
            f"tasks failed) in {time.perf_counter() - start:.0f} s")
      log.write(0, dict(started, graph_size=len(graph), insertions=stats.insertions,
                        duplicates=stats.duplicates), kind="cold_start")
  else:
    first_iteration = int(restored.host["iteration"])
    state = restored.state
    try:
      graph = persistence.load(setup.graph_path(c.workdir, restored.step, host), encoder.name)
    except persistence.GraphFileError as error:
      raise SystemExit(f"cannot resume from checkpoint {restored.step}: {error}") from None
    copilot.sampler.params = state.params[rl.ppo.POLICY]
    copilot.sampler.rng = runs.key_from_json(restored.host["copilot_rng"])
    totals.update(restored.host["totals"])
    summarizer.counts.update(restored.host["summaries"])
    print(f"resuming at iteration {first_iteration} from checkpoint {restored.step}")

  order = np.random.default_rng(c.seed).permutation(len(train_tasks))
  b = c.batch_size
  try:
    for it in tqdm.trange(first_iteration, c.num_iterations, desc="expharness_ppo",
                          initial=first_iteration, total=c.num_iterations, disable=host > 0):
      start = time.perf_counter()
      batch_tasks = [train_tasks[order[(it * b + j) % len(train_tasks)]] for j in range(b)]
      for sampler in (copilot.sampler, executor.sampler):
        if sampler is not None:  # decoding independent of earlier turns: bit-exact resume
          sampler.drop_cached_prefixes()
      # 1. Rollout of this host's share: controls, retrieval, executor, rewards, feedback.
      ro = pipeline.rollout(batch_tasks[host::hosts], copilot, graph, encoder, executor.executor,
                            summarizer, cache, retrieval_cfg, c.eta)
      records = feedback_lib.allgather_json(
          [_sample_record(d, r) for d, r in zip(ro.decisions, ro.rewards) if r is not None])
      records = [r for part in records for r in part]
      feedback = feedback_lib.gather_feedback(ro.feedback)
      rollout_s = time.perf_counter() - start
      _write_rollouts(f"{c.workdir}/rollouts/host{host}_iteration_{it + 1}.jsonl", ro)
      metrics = dict(ro.metrics)
      # 2. PPO on the copilot's replies: old logprobs and values, reference, GAE, epochs.
      learn_start = time.perf_counter()
      if records:
        samples = _samples(records, it * b)
        packed, pack = rl.pack_samples(samples, None, c.ppo.minibatch_rows, c.ppo.seq_len)
        packed = rl.map_minibatches(lambda mb: fill_ref(ref_params, fill_old(state.params, mb)),
                                    packed, c.ppo.minibatch_rows)
        packed = advantages(packed, {s.trajectory_id: s.reward for s in samples})
        state, learn = rl.ppo_epochs(step_fn, state, packed, minibatch_rows=c.ppo.minibatch_rows,
                                     num_epochs=c.ppo.epochs, needs_reference=loss_cfg.kl_coef > 0)
        copilot.sampler.params = state.params[rl.ppo.POLICY]
        metrics.update({f"learner/{k}": v for k, v in learn.items()})
        metrics["samples_truncated"] = pack.num_truncated
      learn_s = time.perf_counter() - learn_start
      # 3. Graph feedback, the same list in the same order on every host.
      graph_start = time.perf_counter()
      stats = feedback_lib.apply_feedback(graph, feedback)
      graph_s = time.perf_counter() - graph_start
      # 4. Metrics, checkpoint.
      rewards = [r["reward"] for r in records]
      totals.update(fallbacks=metrics["fallbacks"], tasks_failed=metrics["tasks_failed"],
                    insertions=stats.insertions, duplicates=stats.duplicates,
                    evictions=stats.evictions)
      metrics.update(
          reward=float(np.mean(rewards)) if rewards else float("nan"),
          s_with=float(np.mean(ro.s_with)),
          s_without=float(np.mean([s for s in ro.s_without if s is not None] or [np.nan])),
          R=[d.restart for d in ro.decisions], W=[d.weight for d in ro.decisions],
          graph_size=len(graph), **{f"graph/{k}": v for k, v in stats.as_dict().items()},
          **{f"total/{k}": totals[k] for k in COUNTERS},
          **{f"summaries/{k}": v for k, v in summarizer.counts.items()},
          **{"time/rollout_s": rollout_s, "time/learn_s": learn_s, "time/graph_update_s": graph_s,
             "time/iteration_s": time.perf_counter() - start})
      metrics.update(R_mean=float(np.mean(metrics["R"])), W_mean=float(np.mean(metrics["W"])))
      # The harness's own cost: copilot decoding and learning, retrieval (with the task
      # embeddings), embedding new units, graph updates; the rest is the frozen executor.
      harness_s = (metrics["time/copilot_s"] + metrics["time/retrieval_s"] + learn_s
                   + metrics["time/embed_units_s"] + graph_s)
      metrics["harness_fraction"] = harness_s / metrics["time/iteration_s"]
      if log is not None:
        log.write(it + 1, metrics)
      tqdm.tqdm.write(f"iteration {it + 1}: reward {metrics['reward']:.3f} s_with "
                      f"{metrics['s_with']:.2f} s_without {metrics['s_without']:.2f} graph "
                      f"{len(graph)} fallbacks {metrics['fallbacks']}")
      if (it + 1) % c.checkpoint.every == 0 or it + 1 == c.num_iterations:
        os.makedirs(os.path.dirname(setup.graph_path(c.workdir, it + 1)), exist_ok=True)
        persistence.save(setup.graph_path(c.workdir, it + 1, host), graph)
        ckpt.save(it + 1, state, {"iteration": it + 1, "totals": dict(totals),
                                  "summaries": dict(summarizer.counts),
                                  "copilot_rng": runs.key_to_json(copilot.sampler.rng)})
  finally:
    ckpt.close()
    if log is not None:
      log.close()
  if host == 0:
    runs.export_params(c.workdir, c.num_iterations, state.params)
    plots.plot_training(log.path, f"{c.workdir}/plots", PANELS)
    print(f"metrics: {log.path}; plots: {c.workdir}/plots; checkpoints: {c.workdir}/checkpoints;"
          f" graph: {c.workdir}/graph; s_without: {setup.scores_path(c.workdir)}")


if __name__ == "__main__":
  jax.config.config_with_absl()
  flags.mark_flag_as_required("config")
  app.run(main)
