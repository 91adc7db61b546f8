"""Int4: QAT shares the float tree, its forward is per-channel fake-quant, serving equals QAT."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from memex_jax.models import config as config_lib
from memex_jax.models import quant
from memex_jax.models import transformer


def _setup(family="qwen2"):
  cfg = config_lib.tiny(family)
  tokens = jax.random.randint(jax.random.PRNGKey(5), (2, 9), 0, cfg.vocab_size)
  positions = jnp.broadcast_to(jnp.arange(9), (2, 9))
  params = nn.unbox(transformer.Transformer(cfg).init(jax.random.PRNGKey(0), tokens, positions)["params"])
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
  serving = quant.to_int4_serving(params)
  q = serving["layers"]["mlp"]["up_proj"]
  assert q["kernel_int4"].dtype == jnp.int4 and q["kernel_scale"].shape == (2, 1, cfg.mlp_dim)
  assert "kernel" not in q
  assert serving["embed"]["embedding"].dtype == jnp.float32
  values = np.asarray(q["kernel_int4"].astype(jnp.int32))
  assert values.min() >= -7 and values.max() <= 7 and len(np.unique(values)) > 8
  serve_logits = _forward(cfg.replace(quant="int4_serve"), serving, tokens, positions)
  qat_logits = _forward(cfg.replace(quant="int4_qat"), params, tokens, positions)
  np.testing.assert_allclose(serve_logits, qat_logits, rtol=1e-4, atol=1e-4)


def test_qat_gradients_are_float_and_nonzero():
  cfg, tokens, positions, params = _setup("qwen3")
  model = transformer.Transformer(cfg.replace(quant="int4_qat"))

  def loss(p):
    logits = model.apply({"params": p}, tokens, positions)[0]
    return -jnp.mean(jax.nn.log_softmax(logits)[:, :-1].max(-1))

  grads = jax.jit(jax.grad(loss))(params)
  g = grads["layers"]["attn"]["q_proj"]["kernel"]
  assert g.dtype == jnp.float32 and float(jnp.abs(g).sum()) > 0
