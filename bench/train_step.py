"""Train-step speed and MFU: forward + backward + AdamW with the chunked LM loss.

  python -m bench.train_step                   # CPU-sized default
  python -m bench.train_step --model qwen2_5_0_5b --batch 8 --seq 2048 --dtype bfloat16 \
      --peak_size 8192                         # the H200 row of the foundation issue
  python -m bench.train_step --seq 3072 --train_attention_block 0   # a long row, untiled attention
  python -m bench.train_step --seq 2304 --quant none --no_grad_layers 0 20   # backward through
                                               # the top 10 layers only, beside the full step
  python -m bench.train_step --seq 2560 --quant none --no_grad_layers 20 --trained_fraction 1 0.25
                                               # an SFT row (a quarter of its tokens trained),
                                               # beside the loss on every token
  python -m bench.train_step --seq 2048 --quant none --no_grad_layers 20 --trained_fraction 0.25 \
      --matmul_dtype none bfloat16             # the same with bfloat16 products (AMX), beside

MFU = (6 N + 12 L S d) * tokens / step_time / peak, N = all parameters, L layers, S sequence
length, d model width (attention counted non-causal), peak = a measured square matmul. With
no-gradient layers or a trained fraction below 1 the FLOPs are still the full step's: MFU is
then its full-step equivalent.
"""

from __future__ import annotations

import argparse
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from bench import report
from memex_jax.runs import flops
from bench.sampler import MODELS
from memex_jax.models import logprobs as logprobs_lib
from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig


def step_call(cfg: ModelConfig, params: dict, tokens: jax.Array, chunk: int,
              trained_fraction: float = 1.0) -> Callable[[], jax.Array]:
  """A call running one jitted AdamW step of the next-token loss on tokens [B T]; returns the loss.

  With `trained_fraction` < 1 the loss covers that share of each row's tokens, as a run at the
  start of every 256 (as assistant turns lie in a demonstration), and the head is formed on
  them only. Every call starts from the same params and optimizer state, so each does identical
  work.
  """
  batch, seq = tokens.shape
  positions = jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), (batch, seq))
  where = None
  if trained_fraction < 1.0:
    where = ((positions % 256) < int(256 * trained_fraction)) & (positions > 0)  # B T
  opt = optax.adamw(1e-5, weight_decay=0.1)
  state = opt.init(params)

  def loss_fn(p):
    logp = logprobs_lib.sequence_logprobs(cfg, p, tokens, positions, chunk_size=chunk, where=where)
    trained = jnp.ones_like(logp, bool).at[:, 0].set(False) if where is None else where
    return -jnp.sum(jnp.where(trained, logp, 0.0)) / jnp.sum(trained)

  @jax.jit
  def step(p, s):
    loss, grads = jax.value_and_grad(loss_fn)(p)
    updates, s = opt.update(grads, s, p)
    return optax.apply_updates(p, updates), s, loss

  return lambda: step(params, state)[2]


def run(model: str, batch: int, seq: int, dtype: str, quant: str, chunk: int, repeats: int,
        peak: float, train_attention_block: int | None = None, no_grad_layers: int = 0,
        trained_fraction: float = 1.0, matmul_dtype: str = "none") -> dict:
  cfg = MODELS[model]().replace(param_dtype="float32", dtype=dtype, remat=True, quant=quant,
                                no_grad_layers=no_grad_layers,
                                matmul_dtype=None if matmul_dtype == "none" else matmul_dtype)
  if train_attention_block is not None:
    cfg = cfg.replace(train_attention_block=train_attention_block)
  tokens = jax.random.randint(jax.random.PRNGKey(1), (batch, seq), 0, cfg.vocab_size)
  init = jax.jit(transformer.Transformer(cfg).init)
  params = nn.unbox(init(jax.random.PRNGKey(0), tokens[:1, :8], tokens[:1, :8])["params"])
  seconds = report.time_call(step_call(cfg, params, tokens, chunk, trained_fraction), repeats)
  achieved = flops.train_flops_per_token(cfg, seq) * batch * seq / seconds
  return {"model": model, "dtype": dtype, "quant": quant, "batch": batch, "seq": seq,
          "train_attention_block": cfg.train_attention_block, "no_grad_layers": no_grad_layers,
          "trained_fraction": trained_fraction, "matmul_dtype": matmul_dtype,
          "params_M": cfg.num_params / 1e6,
          "step_s": seconds,
          "tokens_per_s": batch * seq / seconds, "TFLOPs": achieved / 1e12, "MFU": achieved / peak}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", default="smollm2_135m", choices=sorted(MODELS))
  parser.add_argument("--batch", type=int, default=1)
  parser.add_argument("--seq", type=int, default=256)
  parser.add_argument("--dtype", default="float32")
  parser.add_argument("--chunk", type=int, default=512, help="loss chunk in tokens")
  parser.add_argument("--train_attention_block", type=int, default=None,
                      help="attention tile size (0 = one masked attention; default: the model's)")
  parser.add_argument("--quant", nargs="+", default=["none", "int4_qat"],
                      choices=["none", "int4_qat"], help="one row per quantization")
  parser.add_argument("--no_grad_layers", type=int, nargs="+", default=[0],
                      help="lowest layers without gradient (ModelConfig.no_grad_layers), one row "
                      "per value")
  parser.add_argument("--trained_fraction", type=float, nargs="+", default=[1.0],
                      help="share of each row's tokens in the loss (the head runs on them only), "
                      "one row per value")
  parser.add_argument("--matmul_dtype", nargs="+", default=["none"],
                      choices=["none", "bfloat16"],
                      help="ModelConfig.matmul_dtype (none: products in --dtype); one row each")
  parser.add_argument("--peak_size", type=int, default=2048, help="matmul size for the peak")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  peak = flops.matmul_peak_flops(args.dtype, args.peak_size)
  print(f"measured {args.dtype} matmul peak: {peak / 1e12:.3f} TFLOP/s")
  rows = [run(args.model, args.batch, args.seq, args.dtype, q, args.chunk, args.repeats, peak,
              args.train_attention_block, k, f, m)
          for q in args.quant for k in args.no_grad_layers for f in args.trained_fraction
          for m in args.matmul_dtype]
  report.print_table(f"train step ({jax.default_backend()})", rows)
  report.write_json(args.out or f"bench/results/train_step_{jax.default_backend()}.json",
                    {"peak_flops": peak, "rows": rows})


if __name__ == "__main__":
  main()
