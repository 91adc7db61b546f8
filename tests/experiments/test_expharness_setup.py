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


def test_a_stored_suite_is_sampled_across_its_topics():
  # MMLU's stored order puts 50 moral-scenario questions first: the first 40 are one topic.
  records = setup._suite_records("mmlu", 40, seed=0)  # pylint: disable=protected-access
  assert len({r.id for r in records}) == 40 and len({r.metadata["topic"] for r in records}) >= 10
  assert [r.id for r in setup._suite_records("mmlu", 40, seed=0)] == [r.id for r in records]
  assert [r.id for r in setup._suite_records("mmlu", 40, seed=1)] != [r.id for r in records]
  train, held_out = setup.split_tasks(_config(suites=("mmlu",), per_suite=40, eval_per_suite=10))
  assert len(train) == 30 and len(held_out) == 10


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


@pytest.mark.parametrize("variant", ["", "gpu"])
def test_config_sections_build_their_objects(variant):
  from memex_jax import rl, runs  # pylint: disable=g-import-not-at-top
  from memex_jax.harness.copilot import CopilotConfig  # pylint: disable=g-import-not-at-top
  from memex_jax.harness.summarizer import SummarizerConfig  # pylint: disable=g-import-not-at-top
  c = expharness.get_config(variant)
  graph_cfg, retrieval_cfg = setup.harness_configs(c, "full", 384)
  assert graph_cfg.embed_dim == 384 and retrieval_cfg.top_k <= graph_cfg.capacity
  runs.from_section(CopilotConfig, c.copilot, "config.copilot")
  runs.from_section(SummarizerConfig, c.summarizer, "config.summarizer")
  runs.from_section(rl.LossConfig, c.loss, "config.loss")
  runs.from_section(rl.ValueLossConfig, c.value_loss, "config.value_loss")
  runs.from_section(rl.token_advantage_fn, c.advantage, "config.advantage")
  runs.from_section(rl.actor_critic_optimizer, c.optim, "config.optim")
  for ablation in ("no_similarity_filter", "flat", "no_diffusion", "no_utility_ranking"):
    assert setup.harness_configs(c, ablation, 384) != (graph_cfg, retrieval_cfg)


def test_gpu_variant_is_the_paper_setting():
  c = expharness.get_config("gpu")
  assert (c.optim.actor_learning_rate, c.optim.critic_learning_rate) == (5e-6, 1e-5)
  assert c.loss.kl_coef == 0.01 and c.copilot.temperature == 1.0 and c.eta == 1.0
  assert c.batch_size == 16 and c.num_iterations == 500 and c.optim.decay_steps == 500
  assert (c.graph.capacity, c.graph.k_nn, c.graph.edge_threshold, c.graph.utility_ema) == (
      2000, 5, 0.3, 0.1)
  assert (c.retrieval.num_seeds, c.retrieval.top_k, c.retrieval.ucb_c) == (10, 10, 1.0)
  assert c.copilot.reply_prefix == ""  # the paper's copilot writes its own tag
  with pytest.raises(ValueError, match="unknown expharness config variant"):
    expharness.get_config("tpu")


def test_each_host_saves_its_own_graph_copy():
  paths = {setup.graph_path("/w", 3, host) for host in range(4)}
  assert len(paths) == 4 and setup.graph_path("/w", 3) == "/w/graph/step_3.npz"
