"""Decode throughput of the batched JAX sampler (prefill included, temperature 1).

  python -m bench.sampler                      # CPU-sized default
  python -m bench.sampler --model qwen2_5_0_5b --batch 64 --prompt 512 --new_tokens 256 \
      --dtype bfloat16                         # the H200 row of the foundation issue
  python -m bench.sampler --prompt 1536 --cache_length 3072   # decode in an agent's window
  python -m bench.sampler --prompt 1536 --cache_length 3072 --attention_block 0   # untiled prefill

Random-init weights of the named shapes; no stop strings, so every row decodes all tokens. The
KV cache has `--cache_length` slots (default: prompt + new tokens, no more); the agent loop
serves whole context windows, and a decode step's attention spans the cache.
"""

from __future__ import annotations

import argparse
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from bench import report
from memex_jax.models import config as config_lib
from memex_jax.models import quant
from memex_jax.models import transformer
from memex_jax.sampling import decode
from memex_jax.sampling import stops

MODELS = {"tiny": config_lib.tiny, "smollm2_135m": config_lib.smollm2_135m,
          "qwen2_5_0_5b": config_lib.qwen2_5_0_5b}


def generate_call(cfg: config_lib.ModelConfig, params: dict, prompt_ids: jax.Array,
                  new_tokens: int, temperature: float,
                  cache_length: int = 0) -> Callable[[], jax.Array]:
  """A call that prefills prompt_ids [B P] into a fresh cache of `cache_length` slots (0: P +
  new_tokens) and samples `new_tokens` per row.

  No stop strings or eos, so every row samples all of them; top-p is 1.
  """
  batch, prompt = prompt_ids.shape
  table = stops.build_stop_table([""] * cfg.vocab_size, [], eos_ids=[])
  zeros = jnp.zeros((batch,), jnp.int32)

  def once():
    cache = transformer.init_cache(cfg, batch, cache_length or prompt + new_tokens)
    return decode.generate(cfg, params, cache, table, prompt_ids, zeros, zeros + prompt,
                           zeros + new_tokens, jax.random.PRNGKey(2), jnp.float32(temperature),
                           jnp.float32(1.0), max_new_tokens=new_tokens).num_tokens

  return once


def run(model: str, batch: int, prompt: int, new_tokens: int, dtype: str, int4: bool,
        repeats: int, cache_length: int = 0, attention_block: int | None = None) -> dict:
  cfg = MODELS[model]().replace(dtype=dtype, param_dtype=dtype)
  if attention_block is not None:
    cfg = cfg.replace(attention_block=attention_block)
  tokens = jnp.zeros((1, 8), jnp.int32)
  params = nn.unbox(
      jax.jit(transformer.Transformer(cfg).init)(jax.random.PRNGKey(0), tokens, tokens)["params"])
  if int4:
    params, cfg = quant.to_int4_serving(params), cfg.replace(quant="int4_serve")
  prompt_ids = jax.random.randint(jax.random.PRNGKey(1), (batch, prompt), 0, cfg.vocab_size)
  cache_length = cache_length or prompt + new_tokens
  seconds = report.time_call(generate_call(cfg, params, prompt_ids, new_tokens, 1.0, cache_length),
                             repeats)
  return {"model": model, "dtype": dtype, "int4": int4, "batch": batch, "prompt": prompt,
          "new_tokens": new_tokens, "cache_length": cache_length,
          "attention_block": cfg.attention_block, "seconds": seconds,
          "decode_tokens_per_s": batch * new_tokens / seconds}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", default="smollm2_135m", choices=sorted(MODELS))
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--prompt", type=int, default=128)
  parser.add_argument("--new_tokens", type=int, default=32)
  parser.add_argument("--cache_length", type=int, default=0, help="0 = prompt + new_tokens")
  parser.add_argument("--attention_block", type=int, default=None,
                      help="tile size of attention over the cache (0 = untiled; default: the model's)")
  parser.add_argument("--dtype", default="float32")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  if args.cache_length and args.cache_length < args.prompt + args.new_tokens:
    parser.error(f"--cache_length {args.cache_length} holds less than --prompt + --new_tokens")
  rows = [run(args.model, args.batch, args.prompt, args.new_tokens, args.dtype, int4, args.repeats,
              args.cache_length, args.attention_block) for int4 in (False, True)]
  report.print_table(f"sampler decode ({jax.default_backend()})", rows)
  report.write_json(args.out or f"bench/results/sampler_{jax.default_backend()}.json",
                    {"rows": rows})


if __name__ == "__main__":
  main()
