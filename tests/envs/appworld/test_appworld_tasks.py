"""Task designs: deterministic worlds, and the reference solution of every task type passing all
of its checks in the real engine (while a wrong answer fails some)."""

import random

import pytest

from memex_jax.envs.appworld import generate
from memex_jax.envs.appworld import tasks as tasks_lib


def test_designs_are_deterministic_and_consistent():
  a = tasks_lib.design_task("train0_1", "received_note", random.Random(3), large=False)
  b = tasks_lib.design_task("train0_1", "received_note", random.Random(3), large=False)
  c = tasks_lib.design_task("train0_1", "received_note", random.Random(4), large=False)
  assert a == b and a != c
  assert a.apps == ("phone", "venmo", "simple_note") and a.difficulty == 3
  contacts = [r for r in a.records["phone"] if r["model"] == "Contact"]
  assert len(contacts) == 6 and all(len(r["fields"]["relationships"]) == 1 for r in contacts)
  assert a.records["supervisor"][-1]["fields"]["instruction"] == a.specs["instruction"]
  large = tasks_lib.design_task("x_1", "contact_payments", random.Random(3), large=True)
  transactions = [r for r in large.records["venmo"] if r["model"] == "Transaction"]
  assert len(transactions) > 20  # more than one page of results
  with pytest.raises(KeyError):
    tasks_lib.design_task("x_1", "no_such_type", random.Random(0), large=False)


def _solve(env, task, solution):
  env.reset(task)
  for step, code in enumerate(solution):
    observation, done, won, info = env.step(code)
    assert "Execution failed" not in observation, observation
    assert done == (step == len(solution) - 1)
  return won, info


@pytest.mark.parametrize("task_type", list(tasks_lib.TASK_TYPES))
def test_reference_solution_passes_every_check(task_type, task_by_type, shared_env):
  task = task_by_type[task_type]
  won, info = _solve(shared_env, task, generate.read_json(task, "solution"))
  assert won and info["score"] == 1.0, info["checks"]
  assert len(info["checks"]) == len(generate.read_json(task, "checks")) >= 3


def test_challenge_solutions_page_and_pass(worlds, shared_env):
  for task in worlds["test_challenge"][:3]:  # one of each challenge type
    assert generate.read_json(task, "meta")["difficulty"] >= 2
    won, info = _solve(shared_env, task, generate.read_json(task, "solution"))
    assert won, info["checks"]


def test_wrong_answer_scores_below_one(task_by_type, shared_env):
  shared_env.reset(task_by_type["contact_payments"])
  _, done, won, info = shared_env.step("apis.supervisor.complete_task(answer='0.01')")
  assert done and not won
  assert info["score"] == pytest.approx(2 / 3)
  assert [c["name"] for c in info["checks"] if not c["passed"]] == ["answer"]
