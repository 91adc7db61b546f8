"""A sharded train step on a (2, 2, 2) mesh equals its one-device run."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from memex_jax.models import config
from memex_jax.models import transformer
from memex_jax.parallel import mesh as mesh_lib
from memex_jax.parallel import sharding
from memex_jax.rl import learner
from memex_jax.rl import packing
from memex_jax.rl.packing import PackedBatch
from memex_jax.rl.losses import LossConfig

CFG = config.tiny("qwen2")
LOSS = LossConfig()


@pytest.fixture(scope="module")
def mesh():
  return mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))


@pytest.fixture(scope="module")
def params():
  ids = jnp.zeros((1, 1), jnp.int32)
  boxed = transformer.Transformer(CFG).init(jax.random.PRNGKey(0), ids, ids)["params"]
  return nn.meta.unbox(boxed)


def _batch(params, b=8, t=16):
  """Two packed segments per row, random advantages, logprobs filled by the model itself."""
  rng = np.random.default_rng(0)
  half = t // 2
  positions = np.tile(np.concatenate([np.arange(half), np.arange(t - half)]), (b, 1))
  batch = PackedBatch(
      tokens=rng.integers(1, CFG.vocab_size, (b, t)).astype(np.int32),
      positions=positions.astype(np.int32),
      segment_ids=np.tile(np.repeat([1, 2], [half, t - half]), (b, 1)).astype(np.int32),
      loss_mask=(positions >= 2).astype(np.float32),
      rollout_logprobs=np.zeros((b, t), np.float32), old_logprobs=np.zeros((b, t), np.float32),
      ref_logprobs=np.zeros((b, t), np.float32),
      advantages=np.repeat(rng.normal(size=(b, 1)), t, axis=1).astype(np.float32),
      trajectory_ids=np.repeat(np.arange(b)[:, None], t, axis=1).astype(np.int32))
  old = np.asarray(learner.fill_logprobs(CFG, params, batch).old_logprobs)
  noise = rng.normal(scale=0.05, size=old.shape).astype(np.float32)
  return batch.replace(old_logprobs=old, rollout_logprobs=old + noise, ref_logprobs=old - noise)


@pytest.fixture(scope="module")
def one_step(mesh, params):
  """(single-device result, sharded result, sharded input state, batch, jitted sharded step)."""
  optimizer = learner.make_optimizer(1e-3)
  batch = _batch(params)
  state = learner.TrainState.create(params, optimizer, jax.random.PRNGKey(1))
  expected = learner.jit_train_step(CFG, LOSS, optimizer, state, batch)

  params_sh = sharding.param_shardings(CFG, mesh)
  state_sh = sharding.train_state_shardings(state, mesh, params_sh, optimizer)
  batch_sh = sharding.batch_shardings(batch, mesh)
  step = sharding.shard_step(functools.partial(learner.train_step, CFG, LOSS, optimizer), mesh,
                             state_sh, batch_sh)
  sharded_state = jax.device_put(state, state_sh)
  sharded_batch = sharding.put_batch(batch, batch_sh)
  lowered = step.lower(sharded_state, sharded_batch)
  got = lowered.compile()(sharded_state, sharded_batch)
  return expected, got, lowered.as_text()


@pytest.mark.slow
def test_sharded_train_step_equals_single_device_step(one_step):
  (want_state, want_metrics), (got_state, got_metrics), _ = one_step
  assert float(want_metrics["grad_norm"]) > 0
  np.testing.assert_allclose(got_metrics["loss"], want_metrics["loss"], atol=1e-5, rtol=0)
  for key in want_metrics:
    np.testing.assert_allclose(got_metrics[key], want_metrics[key], atol=1e-5, rtol=1e-5,
                               err_msg=key)
  flat_want = jax.tree_util.tree_leaves_with_path(want_state.params)
  for (path, want), got in zip(flat_want, jax.tree.leaves(got_state.params)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5, rtol=0,
                               err_msg=jax.tree_util.keystr(path))
  assert int(got_state.step) == 1


@pytest.mark.slow
def test_state_stays_sharded_across_the_step(one_step):
  _, (state, metrics), _ = one_step
  q = state.params["layers"]["attn"]["q_proj"]["kernel"]  # L D H*Dh = 2 64 64
  assert q.sharding.spec == P(None, "fsdp", "tensor")
  assert q.addressable_shards[0].data.shape == (2, 32, 32)
  assert state.params["embed"]["embedding"].sharding.spec == P("tensor", "fsdp")
  adam = state.opt_state[1][0]
  assert adam.mu["layers"]["attn"]["q_proj"]["kernel"].sharding.spec == P(None, "fsdp", "tensor")
  assert adam.count.sharding.spec == P()
  assert metrics["loss"].sharding.spec == P()


@pytest.mark.slow
def test_activation_rules_reach_the_compiled_step(one_step):
  *_, lowered = one_step
  constraints = [line for line in lowered.splitlines() if "sharding_constraint" in line]
  assert any('{"data", "fsdp"}' in line for line in constraints)
  assert any('{"tensor"}' in line for line in constraints)


def test_indivisible_batch_is_a_one_line_error(mesh, params):
  batch = jax.tree.map(lambda x: x[:6], _batch(params))
  with pytest.raises(ValueError, match=r"batch field tokens of size 6 is not divisible by "
                     r"data\*fsdp = 2\*2 = 4"):
    sharding.batch_shardings(batch, mesh)


@pytest.mark.slow
def test_sharded_ppo_epochs_with_minibatches_equals_single_device(mesh, params):
  # The iteration's host batch goes to the mesh one [rows, T] minibatch at a time.
  optimizer = learner.make_optimizer(1e-3)
  batch, rows = _batch(params), 4
  state = learner.TrainState.create(params, optimizer, jax.random.PRNGKey(1))
  fill = functools.partial(learner.fill_logprobs, CFG)
  want_batch = packing.map_minibatches(lambda mb: fill(params, mb), batch, rows)
  want_state, want = learner.ppo_epochs(
      functools.partial(learner.jit_train_step, CFG, LOSS, optimizer), state, want_batch,
      minibatch_rows=rows)

  params_sh = sharding.param_shardings(CFG, mesh)
  state_sh = sharding.train_state_shardings(state, mesh, params_sh, optimizer)
  batch_sh = sharding.batch_shardings(packing.take_rows(batch, slice(0, rows)), mesh)
  put = lambda mb: sharding.put_batch(mb, batch_sh)
  step = sharding.shard_step(functools.partial(learner.train_step, CFG, LOSS, optimizer), mesh,
                             state_sh, batch_sh)
  fill_old = sharding.sharded_jit(fill, mesh, (params_sh, batch_sh), batch_sh)
  sharded_params = jax.device_put(params, params_sh)
  got_batch = packing.map_minibatches(lambda mb: fill_old(sharded_params, put(mb)), batch, rows)
  np.testing.assert_allclose(got_batch.old_logprobs, want_batch.old_logprobs, atol=1e-5)
  got_state, got = learner.ppo_epochs(lambda s, mb: step(s, put(mb)),
                                      jax.device_put(state, state_sh), got_batch,
                                      minibatch_rows=rows)
  assert got["num_updates"] == want["num_updates"] == 2 and got["skipped"] == 0
  np.testing.assert_allclose(got["grad_norm"], want["grad_norm"], rtol=1e-4)
  for g, w in zip(jax.tree.leaves(got_state.params), jax.tree.leaves(want_state.params)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-5)
