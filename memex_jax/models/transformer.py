"""A functional decoder-only transformer for the llama, qwen2 and qwen3 families.

`Transformer(cfg).apply({'params': params}, tokens, positions, cache)` is pure: the KV cache
goes in and comes out. Layers are scanned (`nn.scan`), so every per-layer parameter has a
leading `layers` axis and a deep model compiles as fast as a one-layer one.
"""

from __future__ import annotations

import functools
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from memex_jax.models import decode_attention
from memex_jax.models import layers
from memex_jax.models import products
from memex_jax.models import rope
from memex_jax.models.config import ModelConfig

Array = jax.Array
KVCache = dict[str, Array]  # {'k': [L B S K Dh], 'v': [L B S K Dh]}
_REMAT_POLICIES = {
    "nothing": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.save_from_both_policies(
        jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
        jax.checkpoint_policies.save_only_these_names(layers.PROJECTION))}
LMHead = tuple[Array, int]  # (matrix, its embed axis): ([V D], 1) tied or ([D V], 0)


def init_cache(cfg: ModelConfig, batch: int, length: int, dtype: str | None = None) -> KVCache:
  """An empty KV cache of `length` slots per row; slot s holds the token at position s."""
  shape = (cfg.num_layers, batch, length, cfg.num_kv_heads, cfg.head_dim)
  dt = jnp.dtype(dtype or cfg.dtype)
  return {"k": jnp.zeros(shape, dt), "v": jnp.zeros(shape, dt)}


def attention_mask(positions: Array, segment_ids: Array | None, cache_length: int | None) -> Array:
  """Which keys each query may see: [B 1 T S] bool.

  With a cache, keys are cache slots and a query at position p sees slots 0..p (stale slots past
  p are hidden). Without one, keys are the T inputs: causal in index order and, for packed
  sequences, only within the query's own segment.
  """
  if cache_length is not None:
    visible = jnp.arange(cache_length)[None, None, :] <= positions[:, :, None]  # B T S
  else:
    t = positions.shape[1]
    visible = jnp.tril(jnp.ones((t, t), bool))[None]  # 1 T T
    if segment_ids is not None:
      visible = visible & (segment_ids[:, :, None] == segment_ids[:, None, :])  # B T T
  return visible[:, None]


def layer_inputs(cfg: ModelConfig, positions: Array, segment_ids: Array | None,
                 cache_length: int | None) -> tuple[Array, Array, Array]:
  """What every layer takes besides the residual stream: RoPE cos, sin [B T Dh] and the mask."""
  inv_freq, attention_factor = rope.inverse_frequencies(cfg.head_dim, cfg.rope_theta,
                                                        cfg.rope_scaling)
  cos, sin = rope.rotary_tables(positions, inv_freq, attention_factor)
  return cos, sin, attention_mask(positions, segment_ids, cache_length)


class DecoderLayer(nn.Module):
  """Pre-norm attention + SwiGLU block; the scan carry is the residual stream."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self, x: Array, cos: Array, sin: Array, mask: Array, positions: Array,
               segment_ids: Array | None,
               cache: layers.AttentionCache | None) -> tuple[Array, layers.AttentionCache | None]:
    c = self.cfg
    pdt = jnp.dtype(c.param_dtype)
    h = layers.RMSNorm(c.norm_eps, param_dtype=pdt, name="attn_norm")(x)
    h, cache = layers.Attention(c, name="attn")(h, cos, sin, mask, positions, segment_ids,
                                                  cache)
    x = x + h
    h = layers.RMSNorm(c.norm_eps, param_dtype=pdt, name="mlp_norm")(x)
    x = x + layers.MLP(c, name="mlp")(h)
    return nn.with_logical_constraint(x, ("batch", "length", "embed")), cache


def head_kernel(params: dict, cfg: ModelConfig) -> LMHead:
  """The LM head in its stored layout: the embedding [V D] when tied, else the kernel [D V]."""
  if cfg.tie_embeddings:
    return params["embed"]["embedding"], 1
  return params["lm_head"]["kernel"], 0


def logits_from_hidden(hidden: Array, head: LMHead, operand_dtype: str | None = None) -> Array:
  """hidden [.. D] x the head (contracted over its embed axis) -> float32 logits [.. V].

  The tied head is contracted as [V D]: written as `embedding.T @`, XLA on CPU materializes
  the transpose, a copy of the whole V x D matrix at every decode step. `operand_dtype`: both
  operands cast to it (`products`).
  """
  kernel, embed_axis = head
  return products.dot(hidden, kernel.astype(hidden.dtype),
                      (((hidden.ndim - 1,), (embed_axis,)), ((), ())), operand_dtype)


class Transformer(nn.Module):
  """Decoder-only LM: tokens [B T], positions [B T] -> logits [B T V] (or hidden [B T D])."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self, tokens: Array, positions: Array, cache: KVCache | None = None,
               segment_ids: Array | None = None,
               return_hidden: bool = False) -> tuple[Array, KVCache | None]:
    c = self.cfg
    dt, pdt = jnp.dtype(c.dtype), jnp.dtype(c.param_dtype)
    embed = nn.Embed(c.vocab_size, c.embed_dim, dtype=dt, param_dtype=pdt, name="embed",
                     embedding_init=nn.with_logical_partitioning(
                         nn.initializers.normal(0.02), ("vocab", "embed")))
    x = nn.with_logical_constraint(embed(tokens), ("batch", "length", "embed"))  # B T D
    cos, sin, mask = layer_inputs(c, positions, segment_ids,
                                  None if cache is None else cache["k"].shape[2])

    layer = DecoderLayer
    if c.remat:
      layer = nn.remat(layer, prevent_cse=False, policy=_REMAT_POLICIES[c.remat_saves])
    scanned = nn.scan(
        layer, variable_axes={"params": 0}, split_rngs={"params": True},
        in_axes=(nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast,
                 nn.broadcast if cache is None else 0),
        length=c.num_layers, metadata_params={nn.PARTITION_NAME: "layers"})
    layer_cache = None if cache is None else (cache["k"], cache["v"])
    if c.no_grad_layers and cache is None and not self.is_initializing():
      x = _layers_without_lower_gradient(c, self.variables["params"]["layers"], x, cos, sin,
                                         mask, positions, segment_ids)
    else:
      x, layer_cache = scanned(c, name="layers")(x, cos, sin, mask, positions, segment_ids,
                                                layer_cache)
    new_cache = None if cache is None else {"k": layer_cache[0], "v": layer_cache[1]}
    x = layers.RMSNorm(c.norm_eps, param_dtype=pdt, name="final_norm")(x)
    if return_hidden:
      return x, new_cache
    if c.tie_embeddings:
      logits = logits_from_hidden(x, (embed.embedding, 1))
    else:
      logits = nn.Dense(c.vocab_size, use_bias=False, dtype=dt, param_dtype=pdt, name="lm_head",
                        dot_general=functools.partial(jax.lax.dot_general,
                                                      preferred_element_type=jnp.float32),
                        kernel_init=nn.with_logical_partitioning(
                            nn.initializers.normal(0.02), ("embed", "vocab")))(x)
    return nn.with_logical_constraint(logits, ("batch", "length", "vocab")), new_cache


def _layers_without_lower_gradient(c: ModelConfig, stacked: dict, x: Array, cos: Array,
                                   sin: Array, mask: Array, positions: Array,
                                   segment_ids: Array | None) -> Array:
  """The scanned layers on their stacked params, the lowest `c.no_grad_layers` under
  stop_gradient: autodiff then keeps no residuals of theirs and runs no backward through them."""
  layer = DecoderLayer(c, parent=None)

  def step(h, p):
    return layer.apply({"params": p}, h, cos, sin, mask, positions, segment_ids, None)[0], None

  k = c.no_grad_layers
  lower = jax.tree.map(lambda p: jax.lax.stop_gradient(p[:k]), stacked)
  upper = jax.tree.map(lambda p: p[k:], stacked)
  x = jax.lax.stop_gradient(jax.lax.scan(step, x, lower)[0])
  if c.remat:
    step = jax.checkpoint(step, prevent_cse=False, policy=_REMAT_POLICIES[c.remat_saves])
  return jax.lax.scan(step, x, upper)[0]


# -- one-token decoding with the layers unrolled --
# Inside a decode loop the scanned form re-slices and re-stacks the [L B S K Dh] cache at every
# step (scan inputs and outputs), several passes over the whole cache per token; with one
# buffer per layer the step writes its B slots in place and only the attention reads the cache.
# On the CPU the per-layer buffers take the decode layout (decode_attention.DecodeCache) in the
# same copy; on a mesh or an accelerator they keep the model's, for XLA's own attention.

LayerCaches = tuple[layers.AttentionCache, ...]


def unstack_layers(params: dict, cache: KVCache, decode_layout: bool = True
                   ) -> tuple[tuple[dict, ...], LayerCaches]:
  """Per-layer params and caches out of their stacked [L ..] form (copies, once per decode
  call); the caches in `decode_attention.DecodeCache` layout if `decode_layout`, else (k, v)."""
  n = cache["k"].shape[0]
  layer_params = tuple(jax.tree_util.tree_map(lambda p, i=i: p[i], params["layers"])
                       for i in range(n))
  split = decode_attention.from_model_layout if decode_layout else lambda k, v: (k, v)
  return layer_params, tuple(split(cache["k"][i], cache["v"][i]) for i in range(n))


def stack_layers(caches: LayerCaches) -> KVCache:
  """The per-layer caches back in the stacked {'k','v': [L B S K Dh]} form."""
  k, v = zip(*(decode_attention.to_model_layout(c)
               if isinstance(c, decode_attention.DecodeCache) else c for c in caches))
  return {"k": jnp.stack(k), "v": jnp.stack(v)}


def decode_token(cfg: ModelConfig, params: dict, layer_params: Sequence[dict], caches: LayerCaches,
                 ids: Array, positions: Array) -> tuple[Array, LayerCaches]:
  """Feeds one id per row: ids, positions [B] -> (hidden [B D] after the final norm, caches).

  The same computation as `Transformer` with a cache and T = 1, on `unstack_layers`' form.
  """
  x = params["embed"]["embedding"][ids[:, None]].astype(jnp.dtype(cfg.dtype))  # B 1 D
  cos, sin, mask = layer_inputs(cfg, positions[:, None], None, layers.cache_slots(caches[0]))
  layer = DecoderLayer(cfg)
  new_caches = []
  for p, cache in zip(layer_params, caches):
    x, cache = layer.apply({"params": p}, x, cos, sin, mask, positions[:, None], None, cache)
    new_caches.append(cache)
  x = layers.RMSNorm(cfg.norm_eps, param_dtype=jnp.dtype(cfg.param_dtype)).apply(
      {"params": params["final_norm"]}, x)
  return x[:, 0], tuple(new_caches)
