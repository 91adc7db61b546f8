"""Cold start: seed an empty graph from the executor's own No-Memory runs (appendix
"Cold-start initialization").

A sample of training tasks is solved without experience, each finished trajectory summarised,
and the units inserted, so the copilot's first retrievals find something. The No-Memory runs
are exactly the s_without of those tasks, so their scores go into the cache too.
"""

from __future__ import annotations

from typing import Sequence

from memex_jax.harness import feedback as feedback_lib
from memex_jax.harness.embeddings import Encoder
from memex_jax.harness.executor import Executor
from memex_jax.harness.pipeline import finished, safe_solve
from memex_jax.harness.score_cache import NoMemoryScores
from memex_jax.harness.summarizer import Summarizer
from memex_jax.harness.tasks import HarnessTask


def cold_start(tasks: Sequence[HarnessTask], executor: Executor, summarizer: Summarizer,
               encoder: Encoder, cache: NoMemoryScores | None = None
               ) -> tuple[list[feedback_lib.TaskFeedback], dict[str, int]]:
  """Solves `tasks` without experience and summarises them: (feedback that inserts the units,
  counters). Apply it with `feedback.apply_feedback` (after gathering it, on many hosts).

  Tasks whose run failed are skipped (counted); their No-Memory score is not cached.
  """
  results = safe_solve(executor, tasks, [()] * len(tasks))
  solved = [(t, r) for t, r in zip(tasks, results) if not r.error]
  if cache is not None and solved:
    scores = {t.task_id: r.score for t, r in solved}
    cache.get_or_compute(list(scores), lambda ids: {i: scores[i] for i in ids})
  units = summarizer.summarize([finished(t, r) for t, r in solved])
  kept = [(t, u) for (t, _), u in zip(solved, units) if u is not None]
  embeddings = encoder.encode([u.text for _, u in kept]) if kept else []
  entries = [feedback_lib.task_feedback(t.task_id, (), 0.0, u, e)
             for (t, u), e in zip(kept, embeddings)]
  return entries, {"cold_start_tasks": len(tasks),
                   "cold_start_failed": len(tasks) - len(solved), "cold_start_units": len(kept)}
