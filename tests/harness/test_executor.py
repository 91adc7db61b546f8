"""The executor seam: the local SmolLM2 sampler and the Memex agent loop as frozen executors."""

import json

import pytest

from memex_jax.agent import AgentConfig, ChatRenderer, ScriptedPolicy
from memex_jax.envs.static import metrics
from memex_jax.envs.static.env import StaticTaskEnv
from memex_jax.envs.static.sources import TaskRecord
from memex_jax.harness import executor as executor_lib
from memex_jax.harness import prompts
from memex_jax.harness.experience import ExperienceUnit

HINT = ExperienceUnit("For leg counts: cats have 4 legs each, so two cats have 8.", "skill", "t0")


def _record(index, question, answer):
  return TaskRecord(id=f"object_counting/{index}", suite="object_counting",
                    prompt=f"{question}\nAnswer with the number only.", answer=answer,
                    metadata={"metric": "exact_str_match", "targets": [answer]})


RECORDS = (_record(0, "How many legs do two cats have?", "8"),
           _record(1, "I have a pen and two cups. How many objects do I have?", "3"))


def test_sampler_executor_scores_with_the_task_metric(smollm2_sampler, smollm2_tokenizer):
  executor = executor_lib.SamplerExecutor(smollm2_sampler)
  tasks = [executor_lib.ExecutorTask(r, max_tokens=4) for r in RECORDS]
  results = executor.solve(tasks, [[HINT], []])
  renderer = ChatRenderer(smollm2_tokenizer)
  for record, result, shown in zip(RECORDS, results, [[HINT], []]):
    verdict = metrics.score(record, result.response)
    assert (result.score, result.passed, result.detail) == (verdict.value, verdict.passed,
                                                            verdict.detail)
    assert result.prompt_tokens == len(renderer.prompt_ids(prompts.static_messages(record,
                                                                                   shown)))
    assert 1 <= result.completion_tokens <= 4 and not result.error
  # No-Memory is the same prompt without the block: the with-experience prompt is longer.
  (bare,) = executor.solve(tasks[:1], [[]])
  assert bare.prompt_tokens < results[0].prompt_tokens


def test_prompts_over_the_window_are_scored_failures(smollm2_sampler):
  executor = executor_lib.SamplerExecutor(smollm2_sampler)
  huge = _record(2, "Count: " + "apple " * 300, "300")
  results = executor.solve([executor_lib.ExecutorTask(huge, 2), executor_lib.ExecutorTask(
      RECORDS[0], 2)], [[], []])
  assert results[0].error and results[0].score == 0.0 and "256-token context window" in (
      results[0].detail)
  assert not results[1].error and results[1].completion_tokens >= 1


def test_bad_batches_are_refused(smollm2_sampler):
  executor = executor_lib.SamplerExecutor(smollm2_sampler)
  with pytest.raises(ValueError, match="2 tasks but 1 experience lists"):
    executor.solve([executor_lib.ExecutorTask(r) for r in RECORDS], [[]])
  with pytest.raises(TypeError, match="solves static TaskRecords, got str"):
    executor.solve([executor_lib.ExecutorTask("a game folder")], [[]])


def _answer_from_context(context: str) -> str:
  """Answers 8 only if the experience telling it so reached the agent's context."""
  answer = "8" if "two cats have 8" in context else "5"
  call = json.dumps({"name": "execute", "arguments": {"command": answer}})
  return f"<tool_call>\n{call}\n</tool_call>"


def test_agent_executor_runs_episodes_with_experiences_in_the_task(smollm2_tokenizer):
  renderer = ChatRenderer(smollm2_tokenizer)
  policy = ScriptedPolicy(renderer, [[_answer_from_context] * 2] * 2)
  executor = executor_lib.AgentExecutor(policy, renderer, AgentConfig(max_steps=3),
                                        StaticTaskEnv, family=prompts.QA)
  tasks = [executor_lib.ExecutorTask(RECORDS[0], max_tokens=64),
           executor_lib.ExecutorTask(RECORDS[0], max_tokens=48)]  # two turn budgets: two calls
  with_hint, without = executor.solve(tasks, [[HINT], []])
  assert with_hint.passed and with_hint.score == 1.0 and with_hint.detail == "env_done"
  assert not without.passed and without.score == 0.0
  assert with_hint.prompt_tokens > without.prompt_tokens  # the block is in the context
  assert with_hint.completion_tokens > 0 and not with_hint.error
