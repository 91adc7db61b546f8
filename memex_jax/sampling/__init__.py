"""Batched KV-cache sampling in JAX, with persistent per-episode slots."""

from memex_jax.sampling.completions import complete
from memex_jax.sampling.decode import DecodeOutput, decode_steps, generate, prefill, sample_token
from memex_jax.sampling.config import DEFAULT_STOPS, SamplerConfig, SamplerStats
from memex_jax.sampling.sampler import Sampler
from memex_jax.sampling.sharded import cache_sharding, shard_decode_steps, shard_prefill
from memex_jax.sampling.stops import StopTable, build_stop_table
