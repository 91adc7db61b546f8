"""PPO with a value head: GAE and the clipped value loss on hand-computed cases, the two param
groups' learning rates, and actor-critic updates on a tiny model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.rl import learner
from memex_jax.rl import packing
from memex_jax.rl import ppo
from memex_jax.rl.losses import LossConfig, ValueLossConfig, value_loss


def test_gae_matches_a_hand_computed_episode():
  # Three steps, reward 1 at the end, V = [0.5, 0.4, 0.2], gamma 0.9, lambda 0.8:
  # delta_2 = 1 + 0.9 * 0 - 0.2 = 0.8                       A_2 = 0.8
  # delta_1 = 0 + 0.9 * 0.2 - 0.4 = -0.22                   A_1 = -0.22 + 0.72 * 0.8 = 0.356
  # delta_0 = 0 + 0.9 * 0.4 - 0.5 = -0.14                   A_0 = -0.14 + 0.72 * 0.356 = 0.11632
  # returns = A + V = [0.61632, 0.756, 1.0]
  advantages, returns = ppo.gae(np.array([0.0, 0.0, 1.0]), np.array([0.5, 0.4, 0.2]),
                                gamma=0.9, lam=0.8)
  np.testing.assert_allclose(advantages, [0.11632, 0.356, 0.8], atol=1e-12)
  np.testing.assert_allclose(returns, [0.61632, 0.756, 1.0], atol=1e-12)


def test_gae_limits_are_monte_carlo_and_td():
  rewards, values = np.array([0.0, 2.0, -1.0]), np.array([0.3, -0.2, 0.7])
  # lambda = gamma = 1: A_t = (sum of rewards from t) - V_t.
  mc, _ = ppo.gae(rewards, values, 1.0, 1.0)
  np.testing.assert_allclose(mc, [1.0 - 0.3, 1.0 + 0.2, -1.0 - 0.7])
  # lambda = 0: A_t = r_t + gamma V_{t+1} - V_t.
  td, _ = ppo.gae(rewards, values, 0.5, 0.0)
  np.testing.assert_allclose(td, [0.0 + 0.5 * -0.2 - 0.3, 2.0 + 0.5 * 0.7 + 0.2, -1.0 - 0.7])


def test_gae_batch_puts_each_reward_at_its_samples_last_trained_token(make_sample):
  # Two samples packed into one row: [p p a a] (trajectory 0, reward 1) then [p a] (trajectory
  # 1, reward -1). The first token of a sample is never trained, so trained tokens are at
  # row positions 2, 3 (sample 1) and 5 (sample 2).
  samples = [make_sample([5, 6, 7, 8], [0, 0, 1, 1], trajectory_id=0),
             make_sample([9, 10], [0, 1], trajectory_id=1)]
  batch, _ = packing.pack_samples(samples, None, minibatch_rows=1, seq_len=8)
  values = np.zeros((1, 8), np.float32)
  values[0, [2, 3, 5]] = [0.5, 0.25, 0.1]
  out = ppo.gae_batch(batch.replace(old_values=values), {0: 1.0, 1: -1.0}, gamma=1.0, lam=1.0,
                      whiten=False)
  # Sample 1: A = [1 - 0.5, 1 - 0.25]; sample 2: A = -1 - 0.1; untrained tokens stay 0.
  np.testing.assert_allclose(out.advantages[0], [0, 0, 0.5, 0.75, 0, -1.1, 0, 0], atol=1e-6)
  np.testing.assert_allclose(out.returns[0], [0, 0, 1, 1, 0, -1, 0, 0], atol=1e-6)
  whitened = ppo.gae_batch(batch.replace(old_values=values), {0: 1.0, 1: -1.0})
  trained = whitened.advantages[batch.loss_mask > 0]
  assert abs(trained.mean()) < 1e-6 and abs(trained.std() - 1.0) < 1e-4
  with pytest.raises(ValueError, match="trajectory 1 is packed but has no reward"):
    ppo.gae_batch(batch.replace(old_values=values), {0: 1.0})


def test_value_loss_matches_a_hand_computed_case():
  # Two trained tokens: V = [1.0, 0.0], V_old = [0.5, 0.1], R = [2.0, 0.0], clip 0.2.
  # token 0: unclipped (1 - 2)^2 = 1; clipped V = 0.5 + 0.2 = 0.7 -> (0.7 - 2)^2 = 1.69; max 1.69
  # token 1: unclipped 0; clipped V = 0.1 - 0.1 = 0.0 (within the clip) -> 0; max 0
  # loss = 0.5 * mean(1.69, 0) = 0.4225; the clipped term binds on 1 of 2 tokens.
  # A third, untrained token (mask 0) with wild numbers must not count.
  batch = packing.empty_batch(1, 3).replace(
      loss_mask=np.array([[1, 1, 0]], np.float32),
      old_values=np.array([[0.5, 0.1, 9.0]], np.float32),
      returns=np.array([[2.0, 0.0, -9.0]], np.float32))
  values = jnp.array([[1.0, 0.0, 100.0]])
  loss, metrics = value_loss(values, batch, ValueLossConfig(clip=0.2))
  np.testing.assert_allclose(loss, 0.4225, rtol=1e-6)
  np.testing.assert_allclose(metrics["value_clip_frac"], 0.5)
  # Without the clip: 0.5 * mean(1, 0) = 0.25.
  unclipped, _ = value_loss(values, batch, ValueLossConfig(clip=None))
  np.testing.assert_allclose(unclipped, 0.25, rtol=1e-6)


def test_token_advantage_registry_checks_names_and_options():
  assert "gae" in ppo.TOKEN_ADVANTAGE_ESTIMATORS
  with pytest.raises(ValueError, match="unknown token advantage estimator"):
    ppo.token_advantage_fn("vtrace")
  with pytest.raises(ValueError, match="gae"):
    ppo.token_advantage_fn("gae", gama=0.9)
  assert callable(ppo.token_advantage_fn("gae", gamma=1.0, lam=0.95, whiten=False))


def _packed(make_sample, cfg, rewards):
  rng = np.random.default_rng(3)
  samples = [make_sample(rng.integers(1, cfg.vocab_size, 8), np.r_[np.zeros(4), np.ones(4)],
                         trajectory_id=i) for i in range(len(rewards))]
  batch, _ = packing.pack_samples(samples, None, minibatch_rows=2, seq_len=16)
  return batch


def test_param_groups_take_their_own_learning_rates(make_sample, tiny_model):
  # Adam's first step moves every parameter by lr * g / (|g| + eps) ~ lr * sign(g): the
  # policy's largest move is the actor rate, the head's the critic rate.
  cfg, params = tiny_model
  head = ppo.init_value_head(cfg.embed_dim, jax.random.PRNGKey(1))
  state_params = ppo.actor_critic_params(params, head)
  optimizer = ppo.actor_critic_optimizer(5e-6, 1e-5, weight_decay=0.0, clip_norm=None)
  state = learner.TrainState.create(state_params, optimizer, jax.random.PRNGKey(0))
  batch = _packed(make_sample, cfg, [1.0, -1.0])
  batch = ppo.fill_old_logprobs_and_values(cfg, state.params, batch)
  batch = ppo.gae_batch(jax.device_get(batch), {0: 1.0, 1: -1.0}, whiten=False)
  batch = batch.replace(rollout_logprobs=batch.old_logprobs, ref_logprobs=batch.old_logprobs)
  loss_cfg = LossConfig(kl_coef=0.01)
  new, metrics = ppo.jit_actor_critic_step(cfg, loss_cfg, ValueLossConfig(), optimizer, state,
                                           batch)
  assert int(metrics["skipped"]) == 0
  moved = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), new.params, state.params)
  np.testing.assert_allclose(max(jax.tree.leaves(moved["policy"])), 5e-6, rtol=1e-2)
  np.testing.assert_allclose(max(jax.tree.leaves(moved["value_head"])), 1e-5, rtol=1e-2)
  # At the start the policy is its own reference: the KL term is 0, the ratio 1.
  np.testing.assert_allclose(metrics["kl"], 0.0, atol=1e-6)
  np.testing.assert_allclose(metrics["ratio_mean"], 1.0, atol=1e-6)


def test_actor_critic_updates_fit_the_values_and_raise_the_better_completion(
    make_sample, tiny_model):
  cfg, params = tiny_model
  head = ppo.init_value_head(cfg.embed_dim, jax.random.PRNGKey(1))
  optimizer = ppo.actor_critic_optimizer(1e-3, 1e-2, weight_decay=0.0)
  state = learner.TrainState.create(ppo.actor_critic_params(params, head), optimizer,
                                    jax.random.PRNGKey(0))
  rewards = {0: 1.0, 1: -1.0}
  batch = _packed(make_sample, cfg, list(rewards.values()))
  batch = jax.device_get(ppo.fill_old_logprobs_and_values(cfg, state.params, batch))
  batch = batch.replace(rollout_logprobs=batch.old_logprobs, ref_logprobs=batch.old_logprobs)
  batch = ppo.gae_batch(batch, rewards, gamma=1.0, lam=1.0, whiten=False)
  loss_cfg, value_cfg = LossConfig(kl_coef=0.01, clip_high=0.2), ValueLossConfig(clip=None)
  losses = []
  for _ in range(6):
    state, metrics = ppo.jit_actor_critic_step(cfg, loss_cfg, value_cfg, optimizer, state,
                                               batch)
    losses.append(float(metrics["value_loss"]))
  assert losses[-1] < 0.5 * losses[0]
  logp, _, _ = ppo.logprobs_and_values(cfg, state.params, batch)
  mask = np.asarray(batch.loss_mask) > 0
  change = np.where(mask, np.asarray(logp) - batch.old_logprobs, 0.0)
  rows = np.asarray(batch.trajectory_ids)
  # The rewarded completion became more likely, the penalised one less.
  assert change[rows == 0].sum() > 0 > change[rows == 1].sum()


def test_cosine_decay_reaches_zero_after_decay_steps():
  # Adam's update is ~lr * sign(g); over a 2-step cosine, lr_k = lr * (1 + cos(pi k / 2)) / 2:
  # lr, lr / 2, 0 for k = 0, 1, 2.
  params = ppo.actor_critic_params({"w": jnp.ones(3)}, {"b": jnp.ones(2)})
  optimizer = ppo.actor_critic_optimizer(1e-3, 1e-2, clip_norm=None, decay_steps=2)
  opt_state = optimizer.init(params)
  grads = jax.tree.map(jnp.ones_like, params)
  moves = []
  for _ in range(3):
    updates, opt_state = optimizer.update(grads, opt_state, params)
    moves.append((float(jnp.abs(updates["policy"]["w"]).max()),
                  float(jnp.abs(updates["value_head"]["b"]).max())))
  np.testing.assert_allclose(moves, [(1e-3, 1e-2), (5e-4, 5e-3), (0.0, 0.0)], rtol=1e-3,
                             atol=1e-9)
