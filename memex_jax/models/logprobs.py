"""Teacher-forced token log-probabilities, computed in sequence chunks.

The fp32 logits of a long batch are the largest tensor of a training step (16k tokens x 152k
vocab is ~10 GB), so logits are formed one chunk at a time and rematerialised in the backward.
"""

from __future__ import annotations

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
    chunk_size: tokens of T per chunk; T is padded up to a multiple of it.

  Returns:
    (logprobs [B T] float32, entropy [B T] float32).
  """
  b, t, d = hidden.shape
  chunk = min(chunk_size, t)
  pad = (-t) % chunk
  hidden = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0)))
  targets = jnp.pad(targets, ((0, 0), (0, pad)))
  n = hidden.shape[1] // chunk
  hidden = hidden.reshape(b, n, chunk, d).swapaxes(0, 1)  # N B C D
  targets = targets.reshape(b, n, chunk).swapaxes(0, 1)  # N B C

  @jax.checkpoint
  def one_chunk(h, y):
    logits = transformer.logits_from_hidden(h, head) / temperature  # B C V
    logp = jax.nn.log_softmax(logits, axis=-1)
    chosen = jnp.take_along_axis(logp, y[..., None], axis=-1)[..., 0]
    entropy = -jnp.sum(jnp.exp(logp) * logp, axis=-1)
    return chosen, entropy

  chosen, entropy = jax.lax.map(lambda xs: one_chunk(*xs), (hidden, targets))  # N B C
  chosen = chosen.swapaxes(0, 1).reshape(b, -1)[:, :t]
  entropy = entropy.swapaxes(0, 1).reshape(b, -1)[:, :t]
  return chosen, entropy


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
