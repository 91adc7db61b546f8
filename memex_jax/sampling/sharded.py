"""Decoding over a device mesh: `decode.prefill` and `decode.decode_steps` with their rows and KV
cache split over the batch.

The sampler's KV-cache rows are independent episodes, so decoding is data-parallel: rows, the
cache and the per-row outputs are split over ('data', 'fsdp'), the params keep the training
layout (split over 'fsdp' x 'tensor', see memex_jax/parallel/sharding.py), and the stop table,
rng and scalars are replicated.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from memex_jax import parallel
from memex_jax.models.config import ModelConfig
from memex_jax.sampling import decode


def cache_sharding(mesh: Mesh) -> NamedSharding:
  """KV cache [L B S K Dh]: split on the batch dimension."""
  return NamedSharding(mesh, P(None, parallel.BATCH_AXES))


def shard_prefill(cfg: ModelConfig, mesh: Mesh, params_shardings: Any,
                  rules: parallel.LogicalRules = parallel.ACTIVATION_RULES
                  ) -> Callable[..., tuple[Any, Any]]:
  """`decode.prefill` for `cfg`, jitted with params and cache sharded (the cache is donated).

  The returned function takes (params, cache, prompt, start, prompt_length).
  """
  rows = NamedSharding(mesh, P(parallel.BATCH_AXES))
  cache = {"k": cache_sharding(mesh), "v": cache_sharding(mesh)}
  return parallel.sharded_jit(
      functools.partial(decode.prefill, cfg), mesh, (params_shardings, cache, rows, rows, rows),
      (cache, rows), donate_argnums=(1,), rules=rules)


def shard_decode_steps(cfg: ModelConfig, mesh: Mesh, params_shardings: Any, max_new_tokens: int,
                       rules: parallel.LogicalRules = parallel.ACTIVATION_RULES
                       ) -> Callable[..., decode.DecodeOutput]:
  """`decode.decode_steps` for one (cfg, max_new_tokens), jitted with params and cache sharded.

  The returned function takes `decode.decode_steps`'s arguments after `cfg` and before
  `max_new_tokens`: (params, cache, logits, window, table, position, active, max_tokens, rng,
  temperature, top_p). The cache is donated.
  """
  rows = NamedSharding(mesh, P(parallel.BATCH_AXES))
  rep = parallel.replicated(mesh)
  cache = {"k": cache_sharding(mesh), "v": cache_sharding(mesh)}
  # The model's cache layout: a mesh serves accelerators and multi-device hosts, where XLA's
  # attention over it is the measured path; the per-call relayout was measured on one CPU only.
  steps = functools.partial(decode.decode_steps, cfg, max_new_tokens=max_new_tokens,
                            decode_layout=False)
  out = decode.DecodeOutput(cache=cache, tokens=rows, logprobs=rows, num_tokens=rows, done=rows,
                            logits=rows, window=rows)
  return parallel.sharded_jit(
      steps, mesh, (params_shardings, cache, rows, rows, rep, rows, rows, rows, rep, rep, rep), out,
      donate_argnums=(1,), rules=rules)
