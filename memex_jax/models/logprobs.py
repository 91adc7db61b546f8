"""Teacher-forced token log-probabilities, computed in chunks of tokens.

The fp32 logits of a long batch are the largest tensor of a training step (16k tokens x 152k
vocab is ~10 GB), so logits are formed one chunk at a time and recomputed in the backward.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from memex_jax.models import products
from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig

Array = jax.Array


def chunked_logprobs(hidden: Array, head: transformer.LMHead, targets: Array, temperature: float = 1.0,
                     chunk_size: int = 512, where: Array | None = None,
                     operand_dtype: str | None = None) -> tuple[Array, Array]:
  """log_softmax(hidden @ head / temperature)[targets] and the entropy, chunk by chunk.

  Args:
    hidden: [B T D] final hidden states.
    head: the LM head as `transformer.head_kernel` gives it.
    targets: [B T] int32 ids whose log-probabilities are wanted.
    temperature: logits are divided by it (the sampler uses the same definition).
    chunk_size: tokens per chunk, counted over all B T positions (padded up to a multiple).
    where: optional [B T] bool, the positions whose outputs are used. They are gathered, in
      order, into the first chunks and the chunks past them are skipped, forward and backward,
      so the head costs what the wanted tokens cost (a trained row's assistant tokens are a
      quarter of it); the other positions come back 0 with no gradient.
    operand_dtype: the head's products take their operands in it, forward and backward
      (`ModelConfig.matmul_dtype`); None keeps the hidden states' dtype.

  Returns:
    (logprobs [B T] float32, entropy [B T] float32).
  """
  b, t, d = hidden.shape
  n = b * t
  hidden, targets = hidden.reshape(n, d), targets.reshape(n)
  if where is not None:
    wanted = where.reshape(n)
    order = jnp.argsort(jnp.logical_not(wanted), stable=True)  # wanted positions first
    hidden, targets = hidden[order], targets[order]
  chunk = min(chunk_size, n)
  pad = (-n) % chunk
  hidden = jnp.pad(hidden, ((0, pad), (0, 0))).reshape(-1, chunk, d)  # N C D
  targets = jnp.pad(targets, (0, pad)).reshape(-1, chunk)  # N C
  starts = jnp.arange(hidden.shape[0]) * chunk  # N
  active = starts < (n if where is None else jnp.sum(wanted))
  kernel, embed_axis = head
  chosen, entropy = _head_logprobs(hidden, kernel, targets, active, embed_axis,
                                   temperature, operand_dtype)  # N C
  chosen, entropy = chosen.reshape(-1)[:n], entropy.reshape(-1)[:n]
  if where is not None:
    unsort = jnp.argsort(order)
    chosen = jnp.where(wanted, chosen[unsort], 0.0)
    entropy = jnp.where(wanted, entropy[unsort], 0.0)
  return chosen.reshape(b, t), entropy.reshape(b, t)


# The head's backward is written out rather than left to autodiff: per chunk it recomputes the
# logits and forms both gradients from canonical [M K] x [K N] products. Autodiff's form
# contracts the [C V] logit gradient over its token axis, which XLA on the CPU pays for with a
# strided transposed copy of the whole [C V] tensor, fused into the softmax's backward.


def _chunk_logits(h: Array, kernel: Array, embed_axis: int, temperature: float,
                  operand_dtype: str | None) -> Array:
  """h [C D] -> float32 logits [C V] at the temperature."""
  return transformer.logits_from_hidden(h, (kernel, embed_axis), operand_dtype) / temperature


def _head_stats(hidden, kernel, targets, active, embed_axis, temperature, operand_dtype):
  """(logprobs, entropy, log-sum-exp) [N C], one chunk at a time; inactive chunks give zeros."""

  def one_chunk(xs):
    h, y, on = xs

    def compute():
      logits = _chunk_logits(h, kernel, embed_axis, temperature, operand_dtype)  # C V
      shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
      e = jnp.exp(shifted)
      total = jnp.sum(e, axis=-1)
      log_total = jnp.log(total)
      lse = logits[:, 0] - shifted[:, 0] + log_total
      chosen = jnp.take_along_axis(logits, y[:, None], axis=-1)[:, 0] - lse
      return chosen, log_total - jnp.sum(e * shifted, axis=-1) / total, lse

    zeros = lambda: tuple(jnp.zeros(y.shape, jnp.float32) for _ in range(3))
    return jax.lax.cond(on, compute, zeros)

  return jax.lax.map(one_chunk, (hidden, targets, active))


# One exponential per logit in each direction: the entropy is log(sum e) - sum(e (z - max)) /
# sum e with e = exp(z - max), and the backward reads the forward's log-sum-exp, so no [C V]
# log-softmax is exponentiated twice (the vocabulary's exponentials are the costliest
# elementwise work of a train step on the CPU).


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _head_logprobs(hidden: Array, kernel: Array, targets: Array, active: Array, embed_axis: int,
                   temperature: float, operand_dtype: str | None) -> tuple[Array, Array]:
  """hidden [N C D], targets [N C], active [N] -> (logprobs, entropy) [N C], one chunk at a time;
  an inactive chunk is skipped and gives zeros."""
  return _head_stats(hidden, kernel, targets, active, embed_axis, temperature, operand_dtype)[:2]


def _head_logprobs_fwd(hidden, kernel, targets, active, embed_axis, temperature, operand_dtype):
  chosen, entropy, lse = _head_stats(hidden, kernel, targets, active, embed_axis, temperature,
                                     operand_dtype)
  return (chosen, entropy), (hidden, kernel, targets, active, entropy, lse)


def _head_logprobs_bwd(embed_axis, temperature, operand_dtype, residuals, cotangents):
  """d logp_y / d logits = onehot(y) - p; d entropy / d logits = -p (logp + entropy)."""
  hidden, kernel, targets, active, entropy, lse = residuals
  d_chosen, d_entropy = cotangents  # N C each

  def chunk_grads(d_kernel_t, h, y, ent, chunk_lse, dc, de):
    logp = _chunk_logits(h, kernel, embed_axis, temperature, operand_dtype) - chunk_lse[:, None]
    vocab = jax.lax.broadcasted_iota(jnp.int32, logp.shape, 1)
    d_logits = (jnp.where(vocab == y[:, None], dc[:, None], 0.0)
                - jnp.exp(logp) * (dc[:, None] + de[:, None] * (logp + ent[:, None])))
    d_logits = (d_logits / temperature).astype(h.dtype)  # C V
    d_h = products.dot(d_logits, kernel.astype(h.dtype), (((1,), (1 - embed_axis,)), ((), ())),
                       operand_dtype)  # C D
    h_t = products.row_major_transpose(products.cast(h, operand_dtype))  # a small [D C] copy
    d_kernel_t = d_kernel_t + products.dot(h_t, d_logits, (((1,), (0,)), ((), ())),
                                           operand_dtype)  # D V
    return d_kernel_t, d_h

  def one_chunk(d_kernel_t, xs):
    h, y, on, ent, chunk_lse, dc, de = xs
    skip = lambda d_kernel_t, h, *_: (d_kernel_t, jnp.zeros_like(h))
    return jax.lax.cond(on, chunk_grads, skip, d_kernel_t, h, y, ent, chunk_lse, dc, de)

  d, v = hidden.shape[-1], kernel.shape[1 - embed_axis]
  d_kernel_t, d_hidden = jax.lax.scan(
      one_chunk, jnp.zeros((d, v), jnp.float32),
      (hidden, targets, active, entropy, lse, d_chosen, d_entropy))
  d_kernel = d_kernel_t.T if embed_axis == 1 else d_kernel_t
  return d_hidden.astype(hidden.dtype), d_kernel.astype(kernel.dtype), None, None


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
                         chunk_size: int = 512,
                         where: Array | None = None) -> tuple[Array, Array]:
  """(logprobs [B T], entropy [B T]) of tokens from the model's final hidden states [B T D].

  For callers that read the hidden states for something else too (a value head): one forward.
  `where` [B T] (optional): the tokens whose outputs are used (the others get 0 and cost no
  head compute; see `chunked_logprobs`).
  """
  head = transformer.head_kernel(params, cfg)
  logp, entropy = chunked_logprobs(hidden[:, :-1], head, tokens[:, 1:], temperature, chunk_size,
                                   None if where is None else where[:, 1:],
                                   cfg.matmul_dtype)  # B T-1
  return (shift_to_targets(logp, tokens, segment_ids),
          shift_to_targets(entropy, tokens, segment_ids))


def sequence_logprobs(cfg: ModelConfig, params: dict, tokens: Array, positions: Array,
                      segment_ids: Array | None = None, temperature: float = 1.0,
                      chunk_size: int = 512, return_entropy: bool = False,
                      where: Array | None = None):
  """logprobs [B T] of tokens[:, t] given tokens[:, :t]; entry 0 of each row is 0.

  With segment ids, the first token of each packed segment also gets 0 (nothing precedes it).
  With `return_entropy`, returns (logprobs, entropy [B T]) with the same zeros. With `where`
  [B T], only those tokens' outputs are formed (0 elsewhere).
  """
  model = transformer.Transformer(cfg)
  hidden, _ = model.apply({"params": params}, tokens, positions, segment_ids=segment_ids,
                          return_hidden=True)  # B T D
  logp, entropy = logprobs_from_hidden(cfg, params, hidden, tokens, segment_ids, temperature,
                                       chunk_size, where)
  return (logp, entropy) if return_entropy else logp
