"""Teacher-forced token log-probabilities, computed in chunks of tokens.

The fp32 logits of a long batch are the largest tensor of a training step (16k tokens x 152k
vocab is ~10 GB), so logits are formed one chunk at a time and recomputed in the backward.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig

Array = jax.Array


def chunked_logprobs(hidden: Array, head: transformer.LMHead, targets: Array, temperature: float = 1.0,
                     chunk_size: int = 512) -> tuple[Array, Array]:
  """log_softmax(hidden @ head / temperature)[targets] and the entropy, chunk by chunk.

  Args:
    hidden: [B T D] final hidden states.
    head: the LM head as `transformer.head_kernel` gives it.
    targets: [B T] int32 ids whose log-probabilities are wanted.
    temperature: logits are divided by it (the sampler uses the same definition).
    chunk_size: tokens per chunk, counted over all B T positions (padded up to a multiple).

  Returns:
    (logprobs [B T] float32, entropy [B T] float32).
  """
  b, t, d = hidden.shape
  chunk = min(chunk_size, b * t)
  pad = (-b * t) % chunk
  hidden = jnp.pad(hidden.reshape(b * t, d), ((0, pad), (0, 0))).reshape(-1, chunk, d)  # N C D
  targets = jnp.pad(targets.reshape(b * t), (0, pad)).reshape(-1, chunk)  # N C
  kernel, embed_axis = head
  chosen, entropy = _head_logprobs(hidden, kernel, targets, embed_axis, temperature)  # N C
  unchunk = lambda x: x.reshape(-1)[:b * t].reshape(b, t)
  return unchunk(chosen), unchunk(entropy)


# The head's backward is written out rather than left to autodiff: per chunk it recomputes the
# logits and forms both gradients from canonical [M K] x [K N] products. Autodiff's form
# contracts the [C V] logit gradient over its token axis, which XLA on the CPU pays for with a
# strided transposed copy of the whole [C V] tensor, fused into the softmax's backward.


def _chunk_forward(h: Array, kernel: Array, embed_axis: int, temperature: float):
  """h [C D] -> (logp [C V], entropy [C]) in float32."""
  logits = transformer.logits_from_hidden(h, (kernel, embed_axis)) / temperature  # C V
  logp = jax.nn.log_softmax(logits, axis=-1)
  return logp, -jnp.sum(jnp.exp(logp) * logp, axis=-1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _head_logprobs(hidden: Array, kernel: Array, targets: Array, embed_axis: int,
                   temperature: float) -> tuple[Array, Array]:
  """hidden [N C D], targets [N C] -> (logprobs, entropy) [N C], one chunk at a time."""

  def one_chunk(xs):
    h, y = xs
    logp, entropy = _chunk_forward(h, kernel, embed_axis, temperature)
    return jnp.take_along_axis(logp, y[:, None], axis=-1)[:, 0], entropy

  return jax.lax.map(one_chunk, (hidden, targets))


def _head_logprobs_fwd(hidden, kernel, targets, embed_axis, temperature):
  chosen, entropy = _head_logprobs(hidden, kernel, targets, embed_axis, temperature)
  return (chosen, entropy), (hidden, kernel, targets, entropy)


def _head_logprobs_bwd(embed_axis, temperature, residuals, cotangents):
  """d logp_y / d logits = onehot(y) - p; d entropy / d logits = -p (logp + entropy)."""
  hidden, kernel, targets, entropy = residuals
  d_chosen, d_entropy = cotangents  # N C each

  def one_chunk(d_kernel_t, xs):
    h, y, ent, dc, de = xs
    logp, _ = _chunk_forward(h, kernel, embed_axis, temperature)  # C V
    vocab = jax.lax.broadcasted_iota(jnp.int32, logp.shape, 1)
    d_logits = (jnp.where(vocab == y[:, None], dc[:, None], 0.0)
                - jnp.exp(logp) * (dc[:, None] + de[:, None] * (logp + ent[:, None])))
    d_logits = (d_logits / temperature).astype(h.dtype)  # C V
    d_h = jax.lax.dot_general(d_logits, kernel.astype(h.dtype),
                              (((1,), (1 - embed_axis,)), ((), ())))  # C D
    # h.T is a small [D C] copy; the barrier keeps XLA from folding it back into a transposed
    # contraction of the large operand.
    h_t = jax.lax.optimization_barrier(h.T)
    d_kernel_t = d_kernel_t + jnp.dot(h_t, d_logits, preferred_element_type=jnp.float32)  # D V
    return d_kernel_t, d_h

  d, v = hidden.shape[-1], kernel.shape[1 - embed_axis]
  d_kernel_t, d_hidden = jax.lax.scan(
      one_chunk, jnp.zeros((d, v), jnp.float32), (hidden, targets, entropy, d_chosen, d_entropy))
  d_kernel = d_kernel_t.T if embed_axis == 1 else d_kernel_t
  return d_hidden.astype(hidden.dtype), d_kernel.astype(kernel.dtype), None


_head_logprobs.defvjp(_head_logprobs_fwd, _head_logprobs_bwd)


def shift_to_targets(x: Array, tokens: Array, segment_ids: Array | None = None) -> Array:
  """[B T-1] per-position predictions (position t predicts token t + 1) -> [B T] per target.

  Entry t of the result belongs to tokens[:, t]; entry 0 of each row, and with segment ids the
  first token of each packed segment, get 0 (nothing precedes them).
  """
  starts = jnp.zeros(tokens.shape, bool).at[:, 0].set(True)
  if segment_ids is not None:
    starts = starts.at[:, 1:].set(segment_ids[:, 1:] != segment_ids[:, :-1])
  return jnp.where(starts, 0.0, jnp.pad(x, ((0, 0), (1, 0))))


def logprobs_from_hidden(cfg: ModelConfig, params: dict, hidden: Array, tokens: Array,
                         segment_ids: Array | None = None, temperature: float = 1.0,
                         chunk_size: int = 512) -> tuple[Array, Array]:
  """(logprobs [B T], entropy [B T]) of tokens from the model's final hidden states [B T D].

  For callers that read the hidden states for something else too (a value head): one forward.
  """
  head = transformer.head_kernel(params, cfg)
  logp, entropy = chunked_logprobs(hidden[:, :-1], head, tokens[:, 1:], temperature,
                                   chunk_size)  # B T-1
  return (shift_to_targets(logp, tokens, segment_ids),
          shift_to_targets(entropy, tokens, segment_ids))


def sequence_logprobs(cfg: ModelConfig, params: dict, tokens: Array, positions: Array,
                      segment_ids: Array | None = None, temperature: float = 1.0,
                      chunk_size: int = 512, return_entropy: bool = False):
  """logprobs [B T] of tokens[:, t] given tokens[:, :t]; entry 0 of each row is 0.

  With segment ids, the first token of each packed segment also gets 0 (nothing precedes it).
  With `return_entropy`, returns (logprobs, entropy [B T]) with the same zeros.
  """
  model = transformer.Transformer(cfg)
  hidden, _ = model.apply({"params": params}, tokens, positions, segment_ids=segment_ids,
                          return_hidden=True)  # B T D
  logp, entropy = logprobs_from_hidden(cfg, params, hidden, tokens, segment_ids, temperature,
                                       chunk_size)
  return (logp, entropy) if return_entropy else logp
