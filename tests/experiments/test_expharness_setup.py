"""The ExpHarness task split: deterministic, disjoint train/eval, static suites and ALFWorld."""

import pytest

from experiments import expharness_setup as setup
from experiments.configs import expharness


def _config(**tasks):
  c = expharness.get_config()
  for key, value in tasks.items():
    c.tasks[key] = value
  return c


def test_static_split_is_deterministic_and_disjoint():
  c = _config(per_suite=8, eval_per_suite=3)
  train, held_out = setup.split_tasks(c)
  assert len(train) == 5 and len(held_out) == 3
  assert not {t.task_id for t in train} & {t.task_id for t in held_out}
  again_train, again_held_out = setup.split_tasks(c)
  assert [t.task_id for t in again_train] == [t.task_id for t in train]
  assert [t.task_id for t in again_held_out] == [t.task_id for t in held_out]
  assert all(t.family == "math" and not t.agentic for t in train + held_out)


def test_a_suite_too_small_to_train_on_is_refused():
  with pytest.raises(ValueError, match="leave none for training"):
    setup.split_tasks(_config(per_suite=3, eval_per_suite=3))


def test_alfworld_games_split_like_a_suite(games_root):
  c = _config(suites=("alfworld",), alfworld_dir=games_root, alfworld_split="valid_seen",
              per_suite=6, eval_per_suite=2)
  train, held_out = setup.split_tasks(c)
  assert len(train) == 4 and len(held_out) == 2
  assert not {t.task_id for t in train} & {t.task_id for t in held_out}
  for task in train + held_out:
    assert task.agentic and task.family == "alfworld" and task.suite == "alfworld"
    assert task.executor_task.task == task.task_id  # the game folder the env resets to
    assert any(kind in task.text for kind in ("pick", "look", "clean", "heat", "cool"))
  with pytest.raises(ValueError, match="ALFWorld runs alone"):
    setup.split_tasks(_config(suites=("alfworld", "gsm_symbolic")))
