"""One batch through the harness with real parts (SmolLM2 as copilot, executor and summarizer,
MiniLM, the graph): cold start seeds the graph, the rollout's rewards follow Eq. 14, s_without is
computed once, and an unreachable executor endpoint is a counted failure, not a crash."""

import pytest

from memex_jax.harness import feedback as feedback_lib
from memex_jax.harness import http_executor
from memex_jax.harness import pipeline
from memex_jax.harness.cold_start import cold_start
from memex_jax.harness.copilot import Copilot, CopilotConfig
from memex_jax.harness.executor import SamplerExecutor
from memex_jax.harness.experience import ExperienceGraph
from memex_jax.harness.graph import GraphConfig
from memex_jax.harness.retrieval import RetrievalConfig
from memex_jax.harness.score_cache import NoMemoryScores
from memex_jax.harness.summarizer import Summarizer, SummarizerConfig
from memex_jax.harness.tasks import static_task

RETRIEVAL = RetrievalConfig(num_seeds=2, top_k=2, num_ppr_candidates=2)


@pytest.mark.slow
def test_cold_start_then_a_rollout(harness_sampler, encoder, counting_records, tmp_path):
  tasks = [static_task(r, max_tokens=6) for r in counting_records]
  executor = SamplerExecutor(harness_sampler)
  summarizer = Summarizer(executor, SummarizerConfig(max_tokens=32))
  cache = NoMemoryScores(tmp_path / "s_without.json", "smollm2")
  graph = ExperienceGraph(GraphConfig(capacity=16, embed_dim=encoder.dim, grace_insertions=2),
                          encoder.name)
  entries, counts = cold_start(tasks, executor, summarizer, encoder, cache)
  stats = feedback_lib.apply_feedback(graph, entries)
  assert counts["cold_start_tasks"] == 3 and counts["cold_start_failed"] == 0
  assert stats.insertions + stats.duplicates == counts["cold_start_units"] == len(entries)
  assert sorted(cache.scores) == sorted(t.task_id for t in tasks) and cache.computed == 3

  copilot = Copilot(harness_sampler, CopilotConfig(max_tokens=16))
  ro = pipeline.rollout(tasks[:2], copilot, graph, encoder, executor, summarizer, cache,
                        RETRIEVAL)
  assert cache.computed == 3  # s_without came from the cache
  for s_with, s_without, reward in zip(ro.s_with, ro.s_without, ro.rewards):
    assert reward == feedback_lib.copilot_reward(s_with, s_without)
  if len(graph):
    assert all(1 <= len(s) <= 2 for s in ro.slots)
  assert [f.task_id for f in ro.feedback] == [t.task_id for t in tasks[:2]]
  assert [f.slots for f in ro.feedback] == list(ro.slots)
  assert ro.metrics["tasks_failed"] == 0 and ro.metrics["fallbacks"] == sum(
      not d.parsed for d in ro.decisions)
  before = graph.state.nodes.count.sum()
  feedback_lib.apply_feedback(graph, ro.feedback)
  assert graph.state.nodes.count.sum() == before + sum(len(s) for s in ro.slots)


@pytest.mark.slow
def test_an_unreachable_executor_is_a_counted_failure(harness_sampler, encoder, counting_records,
                                                     tmp_path, free_port):
  tasks = [static_task(r, max_tokens=6) for r in counting_records[:2]]
  remote = http_executor.HttpExecutor(http_executor.EndpointConfig(
      f"http://127.0.0.1:{free_port}/v1", "smollm2", timeout_s=5.0, max_retries=0))
  graph = ExperienceGraph(GraphConfig(capacity=16, embed_dim=encoder.dim, grace_insertions=2),
                          encoder.name)
  cache = NoMemoryScores(tmp_path / "s.json", "remote")
  entries, counts = cold_start(tasks, remote, Summarizer(remote), encoder, cache)
  assert entries == [] and counts["cold_start_failed"] == 2 and not cache.scores
  ro = pipeline.rollout(tasks, Copilot(harness_sampler, CopilotConfig(max_tokens=4)), graph,
                        encoder, remote, Summarizer(remote), cache, RETRIEVAL)
  assert ro.metrics["tasks_failed"] == 2 and ro.metrics["executor_errors"] == 2
  assert ro.rewards == (None, None) and ro.feedback == () and not cache.scores
