"""Int4: QAT shares the float tree, its forward is group-wise fake-quant, serving equals QAT."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from memex_jax.models import config as config_lib
from memex_jax.models import logprobs as logprobs_lib
from memex_jax.models import quant
from memex_jax.models import transformer


def _setup(family="qwen2"):
  cfg = config_lib.tiny(family)
  tokens = jax.random.randint(jax.random.PRNGKey(5), (2, 9), 0, cfg.vocab_size)
  positions = jnp.broadcast_to(jnp.arange(9), (2, 9))
  params = nn.unbox(
      transformer.Transformer(cfg).init(jax.random.PRNGKey(0), tokens, positions)["params"])
  return cfg, tokens, positions, params


def _forward(cfg, params, tokens, positions):
  return jax.jit(transformer.Transformer(cfg).apply)({"params": params}, tokens, positions)[0]


def test_qat_and_float_share_one_tree():
  cfg, tokens, positions, params = _setup()
  qat = transformer.Transformer(cfg.replace(quant="int4_qat"))
  qat_params = nn.unbox(qat.init(jax.random.PRNGKey(0), tokens, positions)["params"])
  assert jax.tree.structure(qat_params) == jax.tree.structure(params)


def test_qat_forward_equals_reference_fake_quant():
  cfg, tokens, positions, params = _setup()
  qat_logits = _forward(cfg.replace(quant="int4_qat"), params, tokens, positions)
  faked = jax.tree_util.tree_map_with_path(
      lambda path, x: quant.fake_quantize_int4(x)
      if any(getattr(k, "key", None) in quant.QUANTIZED_PROJECTIONS for k in path)
      and getattr(path[-1], "key", None) == "kernel" else x, params)
  ref_logits = _forward(cfg, faked, tokens, positions)
  np.testing.assert_allclose(qat_logits, ref_logits, rtol=1e-4, atol=1e-4)
  float_logits = _forward(cfg, params, tokens, positions)
  assert np.max(np.abs(np.asarray(qat_logits - float_logits))) > 1e-4  # quantization did act


def test_serving_tree_is_int4_and_matches_qat():
  cfg, tokens, positions, params = _setup("llama")
  serving = quant.to_int4_serving(params, group=32)
  q = serving["layers"]["mlp"]["up_proj"]
  groups = (2, cfg.embed_dim // 32, cfg.mlp_dim)
  assert q["kernel_int4"].dtype == jnp.int8
  assert q["kernel_scale"].shape == groups and q["kernel_offset"].shape == groups
  assert "kernel" not in q
  assert serving["embed"]["embedding"].dtype == jnp.float32
  values = np.asarray(q["kernel_int4"].astype(jnp.int32))
  assert values.min() == 0 and values.max() == 15
  serve_logits = _forward(cfg.replace(quant="int4_serve"), serving, tokens, positions)
  qat_logits = _forward(cfg.replace(quant="int4_qat"), params, tokens, positions)
  np.testing.assert_allclose(serve_logits, qat_logits, rtol=1e-5, atol=1e-5)


def test_groups_are_asymmetric_along_the_input_dimension():
  kernel = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
  kernel[:32, 0] += 5.0  # one group lies far from zero: only an offset keeps its resolution
  values, scale, offset = quant.quantize_int4(jnp.asarray(kernel), group=32)
  assert scale.shape == offset.shape == (2, 3)
  np.testing.assert_allclose(offset, np.stack([kernel[:32].min(0), kernel[32:].min(0)]))
  faked = np.asarray(quant.dequantize_int4(values, scale, offset))
  # Round to nearest: every weight within half a step of its group.
  step = np.repeat(np.asarray(scale), 32, axis=0)
  assert np.all(np.abs(faked - kernel) <= step / 2 + 1e-6)
  with pytest.raises(ValueError, match="does not divide"):
    quant.quantize_int4(jnp.asarray(kernel), group=48)
  with pytest.raises(ValueError, match="int4_group"):
    config_lib.tiny(quant="int4_qat", int4_group=48)


def test_group_32_reproduces_smollm2_q4_1_weights(smollm2):
  """SmolLM2's GGUF is Q4_1 (asymmetric, blocks of 32 inputs): group-32 int4 is lossless."""
  _, params = smollm2
  for block in ("attn", "mlp"):
    for name, sub in params["layers"][block].items():
      kernel = sub["kernel"][:4]  # a few layers keep the test fast
      faked = np.asarray(jax.jit(quant.fake_quantize_int4, static_argnums=1)(kernel, 32))
      np.testing.assert_allclose(faked, kernel, rtol=0, atol=1e-6 * np.abs(kernel).max(),
                                 err_msg=name)
      coarse = np.asarray(jax.jit(quant.fake_quantize_int4, static_argnums=1)(kernel, 64))
      assert np.abs(coarse - kernel).max() > 1e-3, name  # a coarser grid does lose precision


def test_qat_gradients_are_float_and_nonzero():
  cfg, tokens, positions, params = _setup("qwen3")
  model = transformer.Transformer(cfg.replace(quant="int4_qat"))

  def loss(p):
    logits = model.apply({"params": p}, tokens, positions)[0]
    return -jnp.mean(jax.nn.log_softmax(logits)[:, :-1].max(-1))

  grads = jax.jit(jax.grad(loss))(params)
  g = grads["layers"]["attn"]["q_proj"]["kernel"]
  assert g.dtype == jnp.float32 and float(jnp.abs(g).sum()) > 0


ZEN = ("Beautiful is better than ugly. Explicit is better than implicit. Simple is better than "
       "complex. Complex is better than complicated. Flat is better than nested. Sparse is better "
       "than dense. Readability counts.")


@pytest.mark.slow
def test_qat_adamw_steps_reduce_loss_on_real_text(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  ids = smollm2_tokenizer.encode(ZEN)
  tokens = jnp.asarray([ids], jnp.int32)
  positions = jnp.arange(len(ids), dtype=jnp.int32)[None]
  qat_cfg = cfg.replace(quant="int4_qat")

  def loss_fn(p):
    return -jnp.mean(logprobs_lib.sequence_logprobs(qat_cfg, p, tokens, positions)[:, 1:])

  opt = optax.adamw(1e-4, weight_decay=0.1)

  @jax.jit
  def step(p, state):
    loss, grads = jax.value_and_grad(loss_fn)(p)
    updates, state = opt.update(grads, state, p)
    return optax.apply_updates(p, updates), state, loss

  state = opt.init(params)
  p, losses = params, []
  for _ in range(4):
    p, state, loss = step(p, state)
    losses.append(float(loss))
  assert losses[-1] < losses[0] - 0.1, losses


def test_group_32_int4_keeps_smollm2_next_token_distribution(smollm2, smollm2_tokenizer):
  """KL(float || int4) of SmolLM2's next-token distributions on a few real prompts."""
  cfg, params = smollm2
  prompts = ["The capital of France is", "def fibonacci(n):\n    ", "To make tea, first",
             "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"]
  ids = [smollm2_tokenizer.encode(text) for text in prompts]
  width = max(len(x) for x in ids)
  # One right-padded batch: causal attention keeps padding out of the real positions.
  tokens = jnp.asarray([x + [0] * (width - len(x)) for x in ids], jnp.int32)
  valid = jnp.asarray([[1] * len(x) + [0] * (width - len(x)) for x in ids], jnp.float32)
  pos = jnp.broadcast_to(jnp.arange(width, dtype=jnp.int32), tokens.shape)
  f = jax.nn.log_softmax(_forward(cfg, params, tokens, pos))

  def mean_kl(group):
    q = jax.nn.log_softmax(_forward(cfg.replace(quant="int4_qat", int4_group=group), params,
                                    tokens, pos))
    per_position = jnp.sum(jnp.exp(f) * (f - q), axis=-1)  # B T
    return float(jnp.mean(jnp.sum(per_position * valid, 1) / jnp.sum(valid, 1)))

  lossless, coarse = mean_kl(32), mean_kl(192)
  print(f"KL(float || int4) mean over prompts: group 32 {lossless:.2e}, 192 {coarse:.4f} nats")
  assert lossless < 1e-3 < coarse
