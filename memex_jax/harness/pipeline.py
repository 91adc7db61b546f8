"""One batch of tasks through the harness: controls -> retrieval -> executor -> reward/feedback.

`rollout` is a training iteration's data side (ExpHarness appendix "Training and evaluation"):
the copilot samples (R, W) per task, the graph returns each task's top-K experiences, the frozen
executor solves the task with them (s_with) and, once per task and cached, without (s_without);
the Eq. 14 reward goes to the copilot's sample and to every retrieved node, and each finished
trajectory is summarised into a unit for insertion. `solve_with_slots` is the evaluation side.

Failures stay inside the batch: an executor that cannot be reached, or fails on a task, scores
that task as a counted failure; such a task earns no reward and gives no feedback (its score says
nothing about the experiences), so the run goes on.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import jax.numpy as jnp
import numpy as np

from memex_jax.harness.copilot import Copilot, Decision
from memex_jax.harness.embeddings import Encoder
from memex_jax.harness.executor import Executor, ExecutorResult
from memex_jax.harness.experience import ExperienceGraph
from memex_jax.harness.feedback import TaskFeedback, copilot_reward, task_feedback
from memex_jax.harness.retrieval import RetrievalConfig, retrieve
from memex_jax.harness.score_cache import NoMemoryScores
from memex_jax.harness.summarizer import FinishedTrajectory, Summarizer
from memex_jax.harness.tasks import HarnessTask


def safe_solve(executor: Executor, tasks: Sequence[HarnessTask],
               experiences: Sequence[Sequence]) -> list[ExecutorResult]:
  """executor.solve, with a whole-batch failure (e.g. an unreachable endpoint) turned into
  one error result per task."""
  try:
    return executor.solve([t.executor_task for t in tasks], experiences)
  except (ConnectionError, OSError, TimeoutError) as error:
    detail = f"executor failed: {type(error).__name__}: {error}"
    return [ExecutorResult("", 0.0, False, 0, 0, detail, error=True) for _ in tasks]


def retrieve_slots(graph: ExperienceGraph, queries: np.ndarray, restarts: Sequence[int],
                   weights: Sequence[int], config: RetrievalConfig) -> list[tuple[int, ...]]:
  """Each task's retrieved slots, best first (none from an empty graph)."""
  if len(graph) == 0:
    return [() for _ in range(len(queries))]
  found = retrieve(graph.device_state(), jnp.asarray(queries, jnp.float32),
                   jnp.asarray(restarts, jnp.int32), jnp.asarray(weights, jnp.int32), config)
  return [tuple(int(i) for i in row if i >= 0) for row in np.asarray(found.indices)]


def solve_with_slots(executor: Executor, graph: ExperienceGraph, tasks: Sequence[HarnessTask],
                     slots: Sequence[Sequence[int]]) -> list[ExecutorResult]:
  """The executor on each task with the units in its slots (none: the No-Memory prompt)."""
  return safe_solve(executor, tasks, [graph.units_at(s) for s in slots])


def no_memory_scores(executor: Executor, cache: NoMemoryScores,
                     tasks: Sequence[HarnessTask]) -> tuple[list[float | None], int]:
  """(s_without per task, failures): cached scores, the missing ones computed and cached.

  A task whose No-Memory run failed gets None and is not cached (a later batch retries it).
  """
  by_id = {t.task_id: t for t in tasks}
  missing = cache.missing(list(by_id))
  failures = 0
  if missing:
    results = safe_solve(executor, [by_id[t] for t in missing], [()] * len(missing))
    ok = {t: r.score for t, r in zip(missing, results) if not r.error}
    failures = len(missing) - len(ok)
    if ok:
      cache.get_or_compute(list(ok), lambda ids: {t: ok[t] for t in ids})
  return [cache.scores.get(t.task_id) for t in tasks], failures


def finished(task: HarnessTask, result: ExecutorResult) -> FinishedTrajectory:
  """What the summarizer reads of a solved task."""
  return FinishedTrajectory(task.task_id, task.text, result.transcript or result.response,
                            result.score, task.family)


@dataclasses.dataclass(frozen=True)
class Rollout:
  """One training batch's outcome.

  Attributes:
    tasks: the batch.
    decisions: the copilot's decision per task.
    slots: each task's retrieved slots.
    s_with: each task's score with its experiences.
    s_without: each task's No-Memory score (None if its run failed).
    rewards: Eq. 14 per task, None for tasks that failed (no reward, no feedback).
    feedback: this host's feedback, one entry per task with a reward.
    metrics: counters and timings of the batch.
  """

  tasks: tuple[HarnessTask, ...]
  decisions: tuple[Decision, ...]
  slots: tuple[tuple[int, ...], ...]
  s_with: tuple[float, ...]
  s_without: tuple[float | None, ...]
  rewards: tuple[float | None, ...]
  feedback: tuple[TaskFeedback, ...]
  metrics: dict[str, float]


def rollout(tasks: Sequence[HarnessTask], copilot: Copilot, graph: ExperienceGraph,
            encoder: Encoder, executor: Executor, summarizer: Summarizer, cache: NoMemoryScores,
            retrieval_config: RetrievalConfig, eta: float = 1.0) -> Rollout:
  """Copilot -> retrieval -> executor with and without experience -> rewards and feedback."""
  timer = time.perf_counter
  t0 = timer()
  decisions = copilot.decide([t.text for t in tasks], [t.family for t in tasks])
  t1 = timer()
  queries = encoder.encode([t.text for t in tasks])
  slots = retrieve_slots(graph, queries, [d.restart for d in decisions],
                         [d.weight for d in decisions], retrieval_config)
  t2 = timer()
  results = solve_with_slots(executor, graph, tasks, slots)
  t3 = timer()
  s_without, without_failures = no_memory_scores(executor, cache, tasks)
  t4 = timer()
  rewards = [None if r.error or s is None else copilot_reward(r.score, s, eta)
             for r, s in zip(results, s_without)]
  rewarded = [i for i, r in enumerate(rewards) if r is not None]
  units = summarizer.summarize([finished(tasks[i], results[i]) for i in rewarded])
  t5 = timer()
  texts = [u.text for u in units if u is not None]
  embeddings = iter(encoder.encode(texts) if texts else [])
  feedback = [task_feedback(tasks[i].task_id, slots[i], rewards[i], unit,
                            None if unit is None else next(embeddings))
              for i, unit in zip(rewarded, units)]
  t6 = timer()
  metrics = {
      "tasks": len(tasks), "tasks_failed": len(tasks) - len(rewarded),
      "executor_errors": sum(r.error for r in results),
      "no_memory_failures": without_failures, "fallbacks": sum(not d.parsed for d in decisions),
      "retrieved_per_task": float(np.mean([len(s) for s in slots])),
      "time/copilot_s": t1 - t0, "time/retrieval_s": t2 - t1, "time/executor_s": t3 - t2,
      "time/no_memory_s": t4 - t3, "time/summarizer_s": t5 - t4, "time/embed_units_s": t6 - t5,
  }
  return Rollout(tuple(tasks), tuple(decisions), tuple(tuple(s) for s in slots),
                 tuple(r.score for r in results), tuple(s_without), tuple(rewards),
                 tuple(feedback), metrics)
