"""The learner on a tiny model: logprobs, optimizer, PPO/SFT steps, NaN skipping, PPO epochs
over every generated sample."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.models.logprobs import sequence_logprobs
from memex_jax.rl import learner
from memex_jax.rl import packing
from memex_jax.rl.losses import LossConfig, policy_loss

B, T = 4, 16
LOSS = LossConfig()  # the paper's defaults: clip 0.2 / 0.28, TIS cap 2, KL 0.001


@pytest.fixture(scope="module")
def packed(make_sample, tiny_model):
  """Eight samples of four trajectories in [4, 16]: prompt tokens untrained, advantage +1,
  rollout and reference logprobs equal to the initial model's (a matched sampler)."""
  cfg, params = tiny_model
  rng = np.random.default_rng(1)
  segs = []
  for i, n in enumerate([9, 7, 8, 6, 10, 5, 7, 8]):
    mask = np.r_[np.zeros(3), np.ones(n - 3)]
    segs.append(make_sample(rng.integers(1, cfg.vocab_size, n), mask, trajectory_id=i // 2,
                            index=i % 2))
  batch, stats = packing.pack_samples(segs, {t: 1.0 for t in range(4)}, B, T)
  assert stats.num_packed == 8 and stats.num_minibatches == 1
  batch = learner.fill_logprobs(cfg, params, batch, field="ref_logprobs")
  return batch.replace(rollout_logprobs=batch.ref_logprobs)


@pytest.fixture(scope="module")
def optimizer():
  return learner.make_optimizer(learning_rate=3e-4, weight_decay=0.1, clip_norm=1.0)


def fresh_state(params, optimizer):
  return learner.TrainState.create(params, optimizer, jax.random.PRNGKey(7))


def first_rows(batch):
  """The minibatch shape ppo_epochs uses below, so one compiled train step serves all."""
  return jax.tree.map(lambda x: x[:B // 2], batch)


def test_fill_logprobs_matches_the_model_on_trained_tokens_and_entropy_is_aligned(tiny_model,
                                                                                   packed):
  cfg, params = tiny_model
  filled = learner.fill_logprobs(cfg, params, packed)
  expected = jax.jit(sequence_logprobs, static_argnums=0)(
      cfg, params, packed.tokens, packed.positions, packed.segment_ids)
  trained = np.asarray(packed.loss_mask) > 0
  assert 0 < trained.sum() < trained.size
  np.testing.assert_allclose(filled.old_logprobs, np.where(trained, expected, 0.0), atol=1e-5)
  np.testing.assert_allclose(filled.ref_logprobs, packed.ref_logprobs)  # untouched field
  _, entropy = jax.jit(learner.token_logprobs, static_argnums=0)(cfg, params, packed)
  assert not np.asarray(entropy)[~trained].any()
  # A random tiny model is close to uniform over its 256 tokens.
  inside = np.asarray(entropy)[trained]
  assert 0.9 * np.log(cfg.vocab_size) < inside.min() <= inside.max() <= np.log(cfg.vocab_size)
  with pytest.raises(ValueError, match="field='rollout_logprobs'"):
    learner.fill_logprobs(cfg, params, packed, field="rollout_logprobs")


def test_weight_decay_applies_to_kernels_and_embeddings_only(tiny_model):
  _, params = tiny_model
  opt = learner.make_optimizer(learning_rate=0.5, weight_decay=0.1, clip_norm=None)
  zeros = jax.tree.map(jnp.zeros_like, params)
  updates, _ = jax.jit(opt.update)(zeros, opt.init(params), params)
  np.testing.assert_allclose(updates["embed"]["embedding"], -0.05 * params["embed"]["embedding"],
                             rtol=1e-6)
  kernel = params["layers"]["mlp"]["up_proj"]["kernel"]
  np.testing.assert_allclose(updates["layers"]["mlp"]["up_proj"]["kernel"], -0.05 * kernel,
                             rtol=1e-6)
  assert not np.asarray(updates["final_norm"]["scale"]).any()


def test_schedule_warms_up_decays_along_a_cosine_and_stays_at_its_floor():
  rate = learner.learning_rate_schedule(1.0, warmup_steps=2, decay_steps=4, final_fraction=0.1)
  # Warm-up 0 -> 1 over 2 updates, then 0.1 + 0.9 * (1 + cos(pi k / 4)) / 2 for k = 0..4.
  want = [0.0, 0.5, 1.0, 0.1 + 0.9 * (1 + np.cos(np.pi / 4)) / 2, 0.55,
          0.1 + 0.9 * (1 + np.cos(3 * np.pi / 4)) / 2, 0.1, 0.1, 0.1]
  np.testing.assert_allclose([float(rate(k)) for k in range(9)], want, atol=1e-6)
  assert learner.learning_rate_schedule(3e-4) == 3e-4


def test_optimizer_follows_its_schedule_update_by_update():
  # With a constant gradient Adam's update is lr_k * sign(g) (bias-corrected moments, eps tiny;
  # float32 rounds the corrections to ~1e-5).
  opt = learner.make_optimizer(learning_rate=0.1, weight_decay=0.0, clip_norm=None,
                               decay_steps=3, final_fraction=0.5)
  params = {"w": jnp.ones(())}
  state, steps = opt.init(params), []
  for _ in range(5):
    updates, state = opt.update({"w": jnp.full((), 100.0)}, state, params)
    steps.append(-float(updates["w"]))
  rate = learner.learning_rate_schedule(0.1, decay_steps=3, final_fraction=0.5)
  np.testing.assert_allclose(steps, [float(rate(k)) for k in range(5)], rtol=1e-4)
  np.testing.assert_allclose(steps[3:], [0.05, 0.05], rtol=1e-4)


def test_train_steps_lower_the_loss_on_positive_advantages(tiny_model, packed, optimizer):
  cfg, params = tiny_model
  batch = first_rows(learner.fill_logprobs(cfg, params, packed))
  state = fresh_state(params, optimizer)
  losses = []
  for _ in range(4):
    state, metrics = learner.jit_train_step(cfg, LOSS, optimizer, state, batch)
    losses.append(float(metrics["loss"]))
    assert int(metrics["skipped"]) == 0 and float(metrics["grad_norm"]) > 0
  assert losses[0] == pytest.approx(-1.0, abs=1e-4)  # ratio 1, TIS weight 1, KL 0
  assert all(b < a for a, b in zip(losses, losses[1:])), losses
  assert int(state.step) == 4
  after = learner.fill_logprobs(cfg, state.params, batch)
  mask = np.asarray(batch.loss_mask) > 0
  assert np.asarray(after.old_logprobs)[mask].mean() > np.asarray(batch.old_logprobs)[mask].mean()


def test_non_finite_step_is_skipped_and_leaves_state_bit_identical(tiny_model, packed,
                                                                   optimizer):
  cfg, params = tiny_model
  batch = first_rows(learner.fill_logprobs(cfg, params, packed))
  trained = np.argwhere(np.asarray(batch.loss_mask) > 0)[0]
  poisoned = batch.replace(advantages=batch.advantages.at[tuple(trained)].set(jnp.inf))
  state = fresh_state(params, optimizer)
  new_state, metrics = learner.jit_train_step(cfg, LOSS, optimizer, state, poisoned)
  assert int(metrics["skipped"]) == 1 and int(metrics["nonfinite"]) == 1
  assert int(new_state.step) == 1

  def assert_unchanged(new_state):
    for new, old in zip(jax.tree.leaves((new_state.params, new_state.opt_state)),
                        jax.tree.leaves((state.params, state.opt_state))):
      np.testing.assert_array_equal(np.asarray(new), np.asarray(old))

  assert_unchanged(new_state)
  # Nothing to train (all padding) is skipped too: AdamW would otherwise decay the weights.
  empty = batch.replace(loss_mask=jnp.zeros_like(batch.loss_mask))
  empty_state, metrics = learner.jit_train_step(cfg, LOSS, optimizer, state, empty)
  assert int(metrics["skipped"]) == 1 and int(metrics["nonfinite"]) == 0
  assert_unchanged(empty_state)
  recovered, metrics = learner.jit_train_step(cfg, LOSS, optimizer, new_state, batch)
  assert int(metrics["skipped"]) == 0
  assert not np.array_equal(recovered.params["embed"]["embedding"], params["embed"]["embedding"])


def test_ppo_epochs_visit_every_row_once_per_epoch(tiny_model, packed, optimizer):
  cfg, params = tiny_model
  state = fresh_state(params, optimizer)
  batch = learner.fill_logprobs(cfg, params, packed)
  seen = []

  def recording_step(state, minibatch):
    seen.append(np.asarray(minibatch.tokens))
    return learner.jit_train_step(cfg, LOSS, optimizer, state, minibatch)

  new_state, metrics = learner.ppo_epochs(recording_step, state, batch, minibatch_rows=B // 2,
                                          num_epochs=2, needs_reference=True)
  assert metrics["num_updates"] == 4 and int(new_state.step) == 4 and metrics["skipped"] == 0
  assert metrics["ratio_mean"] > 1.0  # later minibatches see the policy move
  assert all(m.shape == (B // 2, T) for m in seen)
  rows = {tuple(r) for r in np.asarray(packed.tokens)}
  for epoch in (seen[:2], seen[2:]):  # every epoch visits each row exactly once
    visited = [tuple(r) for m in epoch for r in m]
    assert len(visited) == B and set(visited) == rows
  assert not np.array_equal(new_state.rng, state.rng)
  with pytest.raises(ValueError, match="minibatch_rows=3"):
    learner.ppo_epochs(recording_step, state, batch, minibatch_rows=3)
  unfilled = batch.replace(ref_logprobs=jnp.zeros_like(batch.ref_logprobs))
  with pytest.raises(ValueError, match="ref_logprobs is all zeros"):
    learner.ppo_epochs(recording_step, state, unfilled, minibatch_rows=B, needs_reference=True)


def test_every_sampled_token_gets_a_gradient_exactly_once_per_epoch(make_sample, tiny_model,
                                                                    optimizer):
  """Thirty samples of up to 16 tokens need ~10 rows of 16; a fixed [2, 16] batch (what the
  learner used to take per iteration) would have dropped most of them."""
  cfg, params = tiny_model
  rng = np.random.default_rng(3)
  samples = []
  for i in range(30):
    n = int(rng.integers(4, 17))
    mask = (rng.random(n) < 0.7).astype(np.int32)
    samples.append(make_sample(rng.integers(1, cfg.vocab_size, n), mask, trajectory_id=i,
                               group_id=i // 5, index=0, reward=float(i % 5)))
  advantages = {i: float(i % 5) - 2.5 for i in range(30)}  # none 0: every trained token moves
  batch, stats = packing.pack_samples(samples, advantages, minibatch_rows=2, seq_len=T)
  assert stats.num_packed == 30 and stats.num_minibatches >= 4
  fill = jax.jit(lambda mb: learner.fill_logprobs(cfg, params, mb))
  batch = packing.map_minibatches(lambda mb: fill(mb).replace(ref_logprobs=fill(mb).old_logprobs),
                                  batch, 2)
  # d loss / d logprob of every token of a minibatch: nonzero exactly where it is trained.
  token_grads = jax.jit(jax.grad(lambda logp, mb: policy_loss(logp, mb, LOSS)[0]))
  trained = []

  def step(state, minibatch):
    grads = np.asarray(token_grads(jnp.asarray(minibatch.old_logprobs), minibatch))
    for row, t in zip(*np.nonzero(grads)):
      trained.append((int(minibatch.trajectory_ids[row, t]), int(minibatch.positions[row, t])))
    return learner.jit_train_step(cfg, LOSS, optimizer, state, minibatch)

  _, metrics = learner.ppo_epochs(step, fresh_state(params, optimizer), batch, minibatch_rows=2,
                                  num_epochs=2)
  assert metrics["num_updates"] == 2 * stats.num_minibatches
  expected = sorted((s.trajectory_id, t) for s in samples
                    for t in np.flatnonzero(s.loss_mask) if t > 0)  # token 0 predicts nothing
  half = len(trained) // 2
  assert sorted(trained[:half]) == expected and sorted(trained[half:]) == expected


def test_sft_steps_lower_the_nll(tiny_model, packed, optimizer):
  cfg, params = tiny_model
  state = fresh_state(params, optimizer)
  losses = []
  for _ in range(3):
    state, metrics = learner.jit_sft_step(cfg, optimizer, state, packed)
    losses.append(float(metrics["loss"]))
  assert losses[0] == pytest.approx(np.log(cfg.vocab_size), rel=0.05)
  assert losses[2] < losses[1] < losses[0], losses
