"""The executor seam: the local SmolLM2 sampler and the Memex agent loop as frozen executors."""

import json

import pytest

from memex_jax.agent import AgentConfig, ChatRenderer, ScriptedPolicy
from memex_jax.envs.static import metrics
from memex_jax.envs.static.env import StaticTaskEnv
from memex_jax.harness import executor as executor_lib
from memex_jax.harness import prompts
from memex_jax.harness.experience import ExperienceUnit

HINT = ExperienceUnit("For leg counts: cats have 4 legs each, so two cats have 8.", "skill", "t0")


def test_sampler_executor_scores_with_the_task_metric(smollm2_sampler, smollm2_tokenizer,
                                                      counting_records):
  executor = executor_lib.SamplerExecutor(smollm2_sampler)
  records = counting_records[:2]
  tasks = [executor_lib.ExecutorTask(r, max_tokens=4) for r in records]
  results = executor.solve(tasks, [[HINT], []])
  renderer = ChatRenderer(smollm2_tokenizer)
  for record, result, shown in zip(records, results, [[HINT], []]):
    verdict = metrics.score(record, result.response)
    assert (result.score, result.passed, result.detail) == (verdict.value, verdict.passed,
                                                            verdict.detail)
    assert result.prompt_tokens == len(renderer.prompt_ids(prompts.static_messages(record,
                                                                                   shown)))
    assert 1 <= result.completion_tokens <= 4 and not result.error
  # No-Memory is the same prompt without the block: the with-experience prompt is longer.
  (bare,) = executor.solve(tasks[:1], [[]])
  assert bare.prompt_tokens < results[0].prompt_tokens


def test_prompts_over_the_window_are_scored_failures(smollm2_sampler, counting_record,
                                                     counting_records):
  executor = executor_lib.SamplerExecutor(smollm2_sampler)
  huge = counting_record(9, "Count: " + "apple " * 300, "300")
  results = executor.solve([executor_lib.ExecutorTask(huge, 2), executor_lib.ExecutorTask(
      counting_records[0], 2)], [[], []])
  assert results[0].error and results[0].score == 0.0 and "256-token context window" in (
      results[0].detail)
  assert not results[1].error and results[1].completion_tokens >= 1


def test_bad_batches_are_refused(smollm2_sampler, counting_records):
  executor = executor_lib.SamplerExecutor(smollm2_sampler)
  with pytest.raises(ValueError, match="3 tasks but 1 experience lists"):
    executor.solve([executor_lib.ExecutorTask(r) for r in counting_records], [[]])
  with pytest.raises(TypeError, match="solves static TaskRecords, got str"):
    executor.solve([executor_lib.ExecutorTask("a game folder")], [[]])


def _answer_from_context(context: str) -> str:
  """Answers 8 only if the experience telling it so reached the agent's context."""
  answer = "8" if "two cats have 8" in context else "5"
  call = json.dumps({"name": "execute", "arguments": {"command": answer}})
  return f"<tool_call>\n{call}\n</tool_call>"


def test_agent_executor_runs_episodes_with_experiences_in_the_task(smollm2_tokenizer,
                                                                   counting_records):
  renderer = ChatRenderer(smollm2_tokenizer)
  policy = ScriptedPolicy(renderer, [[_answer_from_context] * 2] * 2)
  executor = executor_lib.AgentExecutor(policy, renderer, AgentConfig(max_steps=3),
                                        StaticTaskEnv, family=prompts.QA)
  # Two turn budgets: the executor runs them in two calls of the agent loop.
  tasks = [executor_lib.ExecutorTask(counting_records[0], max_tokens=64),
           executor_lib.ExecutorTask(counting_records[0], max_tokens=48)]
  with_hint, without = executor.solve(tasks, [[HINT], []])
  assert with_hint.passed and with_hint.score == 1.0 and with_hint.detail == "env_done"
  assert not without.passed and without.score == 0.0
  assert with_hint.prompt_tokens > without.prompt_tokens  # the block is in the context
  assert with_hint.completion_tokens > 0 and not with_hint.error
