"""The decoder: shapes, KV-cache decoding equals a full forward (scanned and unrolled), packed
segments stay apart."""

import collections

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memex_jax.models import config as config_lib
from memex_jax.models import transformer


class _Jitted:
  """The model with a jitted `apply` (one compile per shape instead of op-by-op dispatch)."""

  def __init__(self, model):
    self.apply = jax.jit(model.apply)


def _init(cfg, seed=0):
  model = transformer.Transformer(cfg)
  tokens = jnp.zeros((1, 4), jnp.int32)
  params = nn.unbox(jax.jit(model.init)(jax.random.PRNGKey(seed), tokens, tokens)["params"])
  return _Jitted(model), params


def _positions(b, t):
  return jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))


@pytest.mark.parametrize("family", config_lib.FAMILIES)
def test_incremental_decode_matches_full_forward(family):
  cfg = config_lib.tiny(family)
  model, params = _init(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(1), (2, 12), 0, cfg.vocab_size)
  full, _ = model.apply({"params": params}, tokens, _positions(2, 12))
  cache = transformer.init_cache(cfg, 2, 16)
  # Prefill 7 tokens, then one token at a time.
  step_logits, cache = model.apply({"params": params}, tokens[:, :7], _positions(2, 7), cache)
  outs = [step_logits]
  for t in range(7, 12):
    pos = jnp.full((2, 1), t, jnp.int32)
    step_logits, cache = model.apply({"params": params}, tokens[:, t:t + 1], pos, cache)
    outs.append(step_logits)
  np.testing.assert_allclose(jnp.concatenate(outs, 1), full, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("family", config_lib.FAMILIES)
def test_unrolled_decode_token_matches_the_scanned_model(family):
  cfg = config_lib.tiny(family)
  model, params = _init(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(2), (3, 6), 0, cfg.vocab_size)
  cache = transformer.init_cache(cfg, 3, 8)
  _, cache = model.apply({"params": params}, tokens[:, :5], _positions(3, 5), cache)
  # Rows at different positions; row 2's position is past the cache: its write is dropped.
  positions = jnp.asarray([5, 4, 8], jnp.int32)
  want, want_cache = transformer.Transformer(cfg).apply(
      {"params": params}, tokens[:, 5:], positions[:, None], cache, return_hidden=True)
  layer_params, caches = transformer.unstack_layers(params, cache)
  got, caches = jax.jit(transformer.decode_token, static_argnums=0)(
      cfg, params, layer_params, caches, tokens[:, 5], positions)
  np.testing.assert_allclose(got, want[:, 0], atol=1e-5)
  got_cache = transformer.stack_layers(caches)
  for name in ("k", "v"):
    np.testing.assert_allclose(got_cache[name], want_cache[name], atol=1e-5)
  assert not np.array_equal(got_cache["k"][:, 0, 5], cache["k"][:, 0, 5])  # row 0 wrote slot 5
  np.testing.assert_array_equal(got_cache["k"][:, 2], cache["k"][:, 2])  # row 2 wrote nothing


def test_stale_cache_slots_are_invisible():
  cfg = config_lib.tiny("llama")
  model, params = _init(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(2), (1, 6), 0, cfg.vocab_size)
  cache = transformer.init_cache(cfg, 1, 16)
  _, dirty = model.apply({"params": params}, jnp.ones((1, 10), jnp.int32), _positions(1, 10), cache)
  # Rewriting positions 0..5 over a cache that holds 10 older slots must ignore slots 6..9.
  reused, _ = model.apply({"params": params}, tokens, _positions(1, 6), dirty)
  fresh, _ = model.apply({"params": params}, tokens, _positions(1, 6))
  np.testing.assert_allclose(reused, fresh, rtol=2e-5, atol=2e-5)


def test_packed_segments_do_not_attend_across():
  cfg = config_lib.tiny("qwen3")
  model, params = _init(cfg)
  a = jax.random.randint(jax.random.PRNGKey(3), (1, 5), 0, cfg.vocab_size)
  b = jax.random.randint(jax.random.PRNGKey(4), (1, 7), 0, cfg.vocab_size)
  packed = jnp.concatenate([a, b], 1)
  positions = jnp.concatenate([_positions(1, 5), _positions(1, 7)], 1)
  segments = jnp.asarray([[1] * 5 + [2] * 7])
  out, _ = model.apply({"params": params}, packed, positions, segment_ids=segments)
  alone_a, _ = model.apply({"params": params}, a, _positions(1, 5))
  alone_b, _ = model.apply({"params": params}, b, _positions(1, 7))
  np.testing.assert_allclose(out[:, :5], alone_a, rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(out[:, 5:], alone_b, rtol=2e-5, atol=2e-5)


def test_param_count_matches_config():
  for family in config_lib.FAMILIES:
    cfg = config_lib.tiny(family)
    _, params = _init(cfg)
    assert sum(x.size for x in jax.tree.leaves(params)) == cfg.num_params


def test_logical_axes_cover_every_parameter():
  cfg = config_lib.tiny("qwen2")
  model = transformer.Transformer(cfg)
  tokens = jnp.zeros((1, 4), jnp.int32)
  boxed = jax.eval_shape(model.init, jax.random.PRNGKey(0), tokens, tokens)["params"]
  specs = jax.tree.leaves(nn.get_partition_spec(boxed),
                          is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
  assert specs and all(len(s) > 0 for s in specs)
  assert nn.get_partition_spec(boxed)["layers"]["mlp"]["up_proj"]["kernel"] == (
      jax.sharding.PartitionSpec("layers", "embed", "mlp"))


def test_config_rejects_unknown_family_and_bad_heads():
  with pytest.raises(ValueError, match="unknown architecture family 'gpt9'"):
    config_lib.tiny("llama").replace(family="gpt9")
  with pytest.raises(ValueError, match="num_kv_heads"):
    config_lib.tiny("llama", num_heads=3, num_kv_heads=2)


def test_remat_policies_give_the_same_gradients():
  cfg = config_lib.tiny("qwen2")
  _, params = _init(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(3), (2, 8), 0, cfg.vocab_size)

  def grads(c):
    def loss(p):
      logits, _ = transformer.Transformer(c).apply({"params": p}, tokens, _positions(2, 8))
      return jnp.mean(jax.nn.logsumexp(logits, -1))
    return jax.jit(jax.grad(loss))(params)

  plain = grads(cfg)
  for saves in config_lib.REMAT_SAVES:
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), plain,
                 grads(cfg.replace(remat=True, remat_saves=saves)))
  with pytest.raises(ValueError, match="remat_saves='everything'"):
    cfg.replace(remat_saves="everything")


def test_dots_remat_saves_every_projection_output(capsys):
  cfg = config_lib.tiny("llama")
  _, params = _init(cfg)
  tokens = jnp.zeros((1, 8), jnp.int32)
  stacked = lambda width: f"f32[{cfg.num_layers},1,8,{width}] output of scan"

  def saved_per_layer(saves):
    model = transformer.Transformer(cfg.replace(remat=True, remat_saves=saves))
    jax.ad_checkpoint.print_saved_residuals(
        lambda p: model.apply({"params": p}, tokens, _positions(1, 8))[0].sum(), params)
    lines = capsys.readouterr().out.splitlines()
    return collections.Counter(line.split(" from ")[0] for line in lines
                               if line.startswith(f"f32[{cfg.num_layers},") and " of scan " in line)

  q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
  # q, k, v, o, gate, up, down, though each projection hides its dot in a custom VJP
  widths = [q, kv, kv, cfg.embed_dim, cfg.mlp_dim, cfg.mlp_dim, cfg.embed_dim]
  assert saved_per_layer("dots") == collections.Counter(map(stacked, widths))
  assert saved_per_layer("nothing") == collections.Counter([stacked(cfg.embed_dim)])  # input


@pytest.mark.parametrize("remat", [False, True])
def test_no_grad_layers_keep_the_loss_and_the_upper_gradients(remat):
  cfg = config_lib.tiny("llama", num_layers=4, remat=remat)  # tied embedding
  _, params = _init(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(4), (2, 12), 0, cfg.vocab_size)
  segments = jnp.asarray([[0] * 5 + [1] * 7, [0] * 12])

  def loss_and_grads(c):
    def loss(p):
      logits, _ = transformer.Transformer(c).apply({"params": p}, tokens, _positions(2, 12),
                                                   segment_ids=segments)
      picked = jnp.take_along_axis(logits, tokens[..., None], -1)[..., 0]
      return jnp.mean(jax.nn.logsumexp(logits, -1) - picked)
    # Lower layers without gradient: one scan fewer in the backward (none through them).
    scans = str(jax.make_jaxpr(jax.grad(loss))(params)).count("scan[")
    return jax.jit(jax.value_and_grad(loss))(params), scans

  (full_loss, full), full_scans = loss_and_grads(cfg)
  (loss, grads), scans = loss_and_grads(cfg.replace(no_grad_layers=3))
  np.testing.assert_allclose(loss, full_loss, rtol=1e-6)
  assert scans == full_scans + 1  # forward of the lower, forward + backward of the upper
  for got, want in zip(jax.tree.leaves(grads["layers"]), jax.tree.leaves(full["layers"])):
    np.testing.assert_array_equal(got[:3], 0.0)
    np.testing.assert_allclose(got[3:], want[3:], rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(grads["final_norm"]["scale"], full["final_norm"]["scale"],
                             rtol=1e-5, atol=1e-7)
  with pytest.raises(ValueError, match="no_grad_layers=4"):
    cfg.replace(no_grad_layers=4)
