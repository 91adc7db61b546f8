"""Batched KV-cache sampling in JAX, with persistent per-episode slots."""

from memex_jax.sampling.completions import complete
from memex_jax.sampling.decode import DecodeOutput, generate, sample_token
from memex_jax.sampling.sampler import DEFAULT_STOPS, Sampler, SamplerConfig
from memex_jax.sampling.sharded import cache_sharding, shard_generate
from memex_jax.sampling.stops import StopTable, build_stop_table
