"""StaticTaskEnv: the Env seam over one-step, metric-scored episodes."""

from memex_jax.envs import base
from memex_jax.envs.static import builders
from memex_jax.envs.static import env as static_env
from memex_jax.envs.static import sources


def test_is_an_env_and_scores_a_right_answer():
  env = static_env.StaticTaskEnv()
  assert isinstance(env, base.Env)
  record = sources.mmlu_records()[0][0]
  task_text, observation = env.reset(record)
  assert task_text == record.prompt and observation == ""
  observation, done, won, info = env.step(record.answer)
  assert done and won and observation.startswith("Correct")
  assert info["changed_state"] and env.changes_state(record.answer) and info["score"] == 1.0
  assert info["task_id"] == record.id


def test_wrong_answer_ends_the_episode_unwon_and_later_steps_are_inert():
  env = static_env.StaticTaskEnv()
  env.reset(sources.mmlu_records()[0][0])
  observation, done, won, info = env.step("no letter here")
  assert done and not won and observation.startswith("Incorrect") and info["score"] == 0.0
  observation, done, won, info = env.step("A")
  assert done and not won and not info["changed_state"] and not env.changes_state("A")


def test_runs_code_answers_in_the_sandbox_from_a_data_source(tmp_path):
  source = builders.build_suite("humaneval", data_dir=tmp_path, max_examples=2).as_data_source(
      split=builders.SPLIT)
  env = static_env.StaticTaskEnv()
  env.reset(source[1])  # A raw data-source item, bytes fields and all.
  record = sources.TaskRecord.from_example(source[1])
  assert env.step(record.answer)[2]
  env.reset(source[1])
  _, done, won, info = env.step("    return []\n")
  assert done and not won and info["suite"] == "humaneval"
