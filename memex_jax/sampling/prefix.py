"""A context head shared by many episodes (the agent's system prompt), prefilled once.

Every episode of a rollout starts with the same ~1K-id system prompt; prefilling it in each of B
KV rows does B times the work of prefilling it once. The sampler prefills such a head into a
one-row cache of its own and copies its K/V into every row whose context starts with it: the K/V
at a position depend only on the ids up to it, so a copied head equals a prefilled one.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig
from memex_jax.sampling import decode


@dataclasses.dataclass(frozen=True)
class SharedPrefix:
  """A prefilled head.

  Attributes:
    ids: the head's ids.
    cache: their K/V {'k','v': [L 1 P K Dh]}, P >= len(ids) (slots past len(ids) are padding).
  """

  ids: tuple[int, ...]
  cache: transformer.KVCache


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
  """Length of the longest common prefix of two id sequences."""
  n = min(len(a), len(b))
  i = 0
  while i < n and a[i] == b[i]:
    i += 1
  return i


def shared_head(contexts: Sequence[Sequence[int]]) -> int:
  """Length of the prefix every context shares (0 for no contexts)."""
  if not contexts:
    return 0
  n = len(contexts[0])
  for context in contexts[1:]:
    n = common_length(contexts[0][:n], context)
  return n


def prefill(cfg: ModelConfig, params: dict, ids: Sequence[int], length: int) -> SharedPrefix:
  """Prefills `ids` into a fresh one-row cache of `length` >= len(ids) slots."""
  prompt = np.zeros((1, length), np.int32)
  prompt[0, :len(ids)] = ids
  cache, _ = decode.prefill_jit(cfg, params, transformer.init_cache(cfg, 1, length),
                                jnp.asarray(prompt), jnp.zeros((1,), jnp.int32),
                                jnp.asarray([len(ids)], jnp.int32))
  return SharedPrefix(tuple(ids), cache)


@functools.partial(jax.jit, donate_argnums=(0,))
def copy(cache: transformer.KVCache, head: transformer.KVCache,
         rows: jax.Array) -> transformer.KVCache:
  """Writes the head's K/V [L 1 P K Dh] into slots 0..P-1 of each cache row in `rows`.

  rows: [B] int32, B = the cache's rows; entries >= B are padding and are dropped. The cache
  is donated.
  """
  length = head["k"].shape[2]
  return {name: cache[name].at[:, rows, :length].set(
      jnp.broadcast_to(head[name], (head[name].shape[0], rows.shape[0]) + head[name].shape[2:]),
      mode="drop") for name in ("k", "v")}
