"""AppWorld expert demonstrations in the Memex format: docs looked up, archived, read back."""

import pytest

from memex_jax.agent import ChatRenderer
from memex_jax.demos import appworld as demonstrations
from memex_jax.envs.appworld import generate


@pytest.fixture(scope="module")
def renderer(smollm2_tokenizer):
  return ChatRenderer(smollm2_tokenizer)


def test_solution_apis_lists_logins_first():
  solution = ["apis.supervisor.show_profile()",
              "apis.venmo.show_transactions(access_token=t)\napis.phone.search_contacts()",
              "apis.venmo.show_transactions(page_index=1)",
              "notes = every_page(apis.simple_note.search_notes, access_token=t)"]
  assert demonstrations.solution_apis(solution) == [
      ("venmo", "login"), ("venmo", "show_transactions"), ("phone", "login"),
      ("phone", "search_contacts"), ("simple_note", "login"), ("simple_note", "search_notes")]


def test_expert_demonstration_archives_and_reads_the_docs(renderer, task_by_type, shared_env):
  task = task_by_type["received_note"]
  trajectory = demonstrations.make_demonstration(task, renderer, env=shared_env)
  assert trajectory.metrics.success and trajectory.metrics.num_malformed == 0
  assert trajectory.metrics.num_compress == 1 and trajectory.metrics.num_read == 1
  docs = trajectory.memory[demonstrations.DOCS_INDEX]["content"]
  for app, api in demonstrations.solution_apis(generate.read_json(task, "solution")):
    assert f"{app}.{api}(" in docs  # every API the solution calls was looked up and archived
  solution_steps = len(generate.read_json(task, "solution"))
  assert trajectory.metrics.steps == solution_steps + 3
