"""JAX vs PyTorch + transformers on the CPU, side by side on SmolLM2-135M-Instruct's real weights.

  python -m bench.cpu_vs_torch                      # every row, three interleaved runs
  python -m bench.cpu_vs_torch --rows decode_b1 prefill_512 --runs 1

Both sides run in this one process on the same float32 weights (dequantized from the GGUF).
Within a run the JAX and torch measurements of a row alternate (A B A B ..), so a neighbour's
load on a shared machine hits both; a path's figure is the median over `--rounds` alternations
of the median of `--repeats` calls, after one warm-up call (compilation included) at build
time. Rows:
  decode_b{1,8}: greedy, `--prompt` ids then `--new_tokens` sampled ids per row, tokens/s with
    the prefill included (torch: `generate`). The JAX int4 serving form is timed beside them.
  prefill_{512,2048}: one forward filling the KV cache, last position's logits; tokens/s.
  train_b4x512: forward + backward + AdamW on the next-token loss; seconds per step (JAX with
    remat, saving what `--remat_saves` says).
Every row is also timed with `ModelConfig.matmul_dtype` = `--matmul_dtype` (bfloat16 operands,
float32 accumulation: the AMX units), the `jax_mm` path; how far that moves
the policy is measured on real text (teacher-forced logprobs of `--shift_passages` help topics
of 512 tokens, float32 vs bfloat16 products: max and mean |difference|).
The decode roofline is weight bytes per step over a measured memory-copy bandwidth: every
decode step reads every weight once, so batch x bandwidth / bytes bounds tokens/s (`jax_mm`
against the weights' bytes in bfloat16). Prefill and
the train step are bounded by compute instead: their model FLOPs over a measured float32 matmul
peak (the same for both frameworks, as both run float32 on the same cores).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import torch

from bench import int4_kl
from bench import report
from bench import sampler as sampler_bench
from bench import torch_reference
from bench import train_step as train_bench
from memex_jax.runs import flops
from memex_jax.models import gguf_io
from memex_jax.models import hf_io
from memex_jax.models import logprobs as logprobs_lib
from memex_jax.models import quant
from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig
from memex_jax.models.pretrained import smollm2_gguf_path
from memex_jax.tokenizers import Tokenizer

ROWS = ("decode_b1", "decode_b8", "prefill_512", "prefill_2048", "train_b4x512")
TARGET_RATIO = 1.5


def memcpy_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
  """Bytes/s moved by a large numpy copy (read + write), median of `repeats`."""
  src = np.ones(megabytes * 2**20 // 4, np.float32)
  dst = np.empty_like(src)
  times = []
  for _ in range(repeats + 1):
    start = time.perf_counter()
    np.copyto(dst, src)
    times.append(time.perf_counter() - start)
  return 2 * src.nbytes / statistics.median(times[1:])


def tree_bytes(tree: Any) -> int:
  """Storage bytes of a param tree."""
  return sum(x.nbytes for x in jax.tree.leaves(tree))


def _prefill_call(cfg: ModelConfig, params: dict, prompt: jax.Array) -> Callable[[], jax.Array]:
  """Forward over prompt [B P] into a fresh cache; last position's float32 logits [B V]."""
  b, p = prompt.shape

  @jax.jit
  def prefill(params, prompt):
    positions = jnp.broadcast_to(jnp.arange(p, dtype=jnp.int32), (b, p))
    hidden, cache = transformer.Transformer(cfg).apply(
        {"params": params}, prompt, positions, transformer.init_cache(cfg, b, p),
        return_hidden=True)
    head = transformer.head_kernel(params, cfg)
    return transformer.logits_from_hidden(hidden[:, -1], head), cache

  return lambda: prefill(params, prompt)[0]


def _seconds(fn: Callable[[], Any], repeats: int) -> float:
  """Median wall seconds of `repeats` calls of an already warm `fn`."""
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    _block(fn())
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _block(out: Any) -> Any:
  """Waits for a result of either framework (torch runs eagerly, so it is already there)."""
  return out if isinstance(out, torch.Tensor) else jax.block_until_ready(out)


class SideBySide:
  """Builds each row's JAX and torch calls once; `measure` times one run of the chosen rows."""

  def __init__(self, args: argparse.Namespace):
    self.args = args
    self.cfg, params = gguf_io.load_gguf(smollm2_gguf_path())
    self.int4_cfg = self.cfg.replace(quant="int4_serve")
    self.params = jax.device_put(params)
    self.int4_params = jax.jit(quant.to_int4_serving)(self.params)
    self.torch_model = hf_io.torch_model(self.cfg, params)
    self.rng = np.random.default_rng(0)
    self.calls: dict[str, dict[str, Callable[[], Any]]] = {}
    for row in args.rows:
      self.calls[row] = self._build(row, params)
      for fn in self.calls[row].values():
        _block(fn())  # compile (JAX) and warm up once, outside every timing

  def _ids(self, *shape: int) -> np.ndarray:
    return self.rng.integers(0, self.cfg.vocab_size, shape, dtype=np.int32)

  def _build(self, row: str, host_params: Any) -> dict[str, Callable[[], Any]]:
    a = self.args
    # The JAX paths of every row: float32 products, and `--matmul_dtype` products beside.
    variants = {"jax": self.cfg}
    if a.matmul_dtype != "none":
      variants["jax_mm"] = self.cfg.replace(matmul_dtype=a.matmul_dtype)
    if row.startswith("decode_b"):
      prompt = self._ids(int(row.removeprefix("decode_b")), a.prompt)
      generate = lambda cfg, params: sampler_bench.generate_call(
          cfg, params, jnp.asarray(prompt), a.new_tokens, 0.0)
      calls = {name: generate(cfg, self.params) for name, cfg in variants.items()}
      calls["jax_int4"] = generate(self.int4_cfg, self.int4_params)
      return {**calls, "torch": torch_reference.decode(self.torch_model, prompt, a.new_tokens)}
    if row.startswith("prefill_"):
      prompt = self._ids(1, int(row.removeprefix("prefill_")))
      calls = {name: _prefill_call(cfg, self.params, jnp.asarray(prompt))
               for name, cfg in variants.items()}
      return {**calls, "torch": torch_reference.prefill(self.torch_model, prompt)}
    tokens = self._ids(4, 512)
    calls = {name: train_bench.step_call(cfg.replace(remat=True, remat_saves=a.remat_saves),
                                         self.params, jnp.asarray(tokens), a.chunk)
             for name, cfg in variants.items()}
    # The torch step updates its weights in place: it gets its own copy of the model.
    return {**calls, "torch": torch_reference.train_step(
        hf_io.torch_model(self.cfg, host_params), tokens)}

  def logprob_shift(self, passages: int) -> dict[str, float]:
    """How far `--matmul_dtype` products move teacher-forced logprobs on real text [N 512]."""
    tokens = jnp.asarray(int4_kl.reference_passages(Tokenizer.from_gguf(smollm2_gguf_path()),
                                                    passages, 512))
    positions = jnp.broadcast_to(jnp.arange(512, dtype=jnp.int32), tokens.shape)
    logp = jax.jit(lambda c, ids: logprobs_lib.sequence_logprobs(c, self.params, ids, positions),
                   static_argnums=0)
    diff = jnp.abs(logp(self.cfg.replace(matmul_dtype=self.args.matmul_dtype), tokens)
                   - logp(self.cfg, tokens))[:, 1:]  # entry 0 of a row has no logprob
    return {"passages": passages, "tokens_per_passage": 512,
            "max_abs_logprob_diff": float(diff.max()),
            "mean_abs_logprob_diff": float(diff.mean())}

  def measure(self) -> dict[str, dict[str, float]]:
    """Seconds per call of every path of every row, the paths alternating within a row."""
    out = {}
    for row, calls in self.calls.items():
      times: dict[str, list[float]] = {name: [] for name in calls}
      for _ in range(self.args.rounds):
        for name, fn in calls.items():
          times[name].append(_seconds(fn, self.args.repeats))
      out[row] = {name: statistics.median(t) for name, t in times.items()}
    return out


def row_record(row: str, seconds: dict[str, float], args: argparse.Namespace, cfg: ModelConfig,
               ceilings: dict[str, float]) -> dict[str, Any]:
  """One row's speeds, its JAX/torch ratio and each path's fraction of its ceiling.

  Speeds are tokens/s (seconds per step for training); the ceiling is the memory roofline for
  decode and the float32 matmul peak otherwise.
  """
  rec: dict[str, Any] = {"row": row}
  if row == "train_b4x512":
    rec.update({f"{k}_s_per_step": v for k, v in seconds.items()})
    rec["ratio"] = seconds["torch"] / seconds["jax"]
    if "jax_mm" in seconds:
      rec["mm_ratio"] = seconds["torch"] / seconds["jax_mm"]
    step_flops = flops.train_flops_per_token(cfg, 512) * 4 * 512
    rec.update({f"{k}_peak_frac": step_flops / v / ceilings["peak_flops"]
                for k, v in seconds.items()})
    return rec
  if row.startswith("decode_b"):
    work = int(row.removeprefix("decode_b")) * args.new_tokens
  else:
    work = int(row.removeprefix("prefill_"))
  speeds = {k: work / v for k, v in seconds.items()}
  rec.update({f"{k}_tok_s": v for k, v in speeds.items()})
  rec["ratio"] = speeds["jax"] / speeds["torch"]
  if "jax_mm" in speeds:
    rec["mm_ratio"] = speeds["jax_mm"] / speeds["torch"]
  if "jax_int4" in speeds:
    rec["int4_ratio"] = speeds["jax_int4"] / speeds["torch"]
    rec["int4_over_float"] = speeds["jax_int4"] / speeds["jax"]
  for k, v in speeds.items():
    if row.startswith("decode_b"):
      batch = int(row.removeprefix("decode_b"))
      weight_bytes = ceilings[{"jax_int4": "int4_bytes",
                               "jax_mm": "bf16_bytes"}.get(k, "float_bytes")]
      rec[f"{k}_roofline_frac"] = v / (batch * ceilings["bandwidth"] / weight_bytes)
    else:  # the forward third of the training FLOPs
      rec[f"{k}_peak_frac"] = v * flops.train_flops_per_token(cfg, work) / 3 / ceilings[
          "peak_flops"]
  return rec


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=ROWS)
  parser.add_argument("--runs", type=int, default=3, help="interleaved runs, each reported")
  parser.add_argument("--rounds", type=int, default=2, help="A B alternations per row and run")
  parser.add_argument("--repeats", type=int, default=1, help="timed calls per measurement")
  parser.add_argument("--prompt", type=int, default=32)
  parser.add_argument("--new_tokens", type=int, default=64)
  parser.add_argument("--chunk", type=int, default=512, help="JAX loss chunk in tokens")
  parser.add_argument("--remat_saves", default="dots", help="JAX train step's remat policy")
  parser.add_argument("--matmul_dtype", default="bfloat16", choices=("bfloat16", "none"),
                      help="ModelConfig.matmul_dtype of the jax_mm path (none: no such path)")
  parser.add_argument("--shift_passages", type=int, default=8,
                      help="real 512-token passages the matmul_dtype logprob shift is taken on "
                      "(0: not taken)")
  parser.add_argument("--out", default="bench/results/cpu_vs_torch.json")
  args = parser.parse_args()
  if args.shift_passages < 0:
    parser.error(f"--shift_passages must be >= 0, got {args.shift_passages}")

  bench = SideBySide(args)
  ceilings = {"bandwidth": memcpy_bandwidth(), "float_bytes": tree_bytes(bench.params),
              "int4_bytes": tree_bytes(bench.int4_params),
              "bf16_bytes": tree_bytes(bench.params) // 2,
              "peak_flops": flops.matmul_peak_flops("float32", 2048)}
  print(f"memcpy bandwidth {ceilings['bandwidth'] / 1e9:.2f} GB/s; weight bytes per decode step: "
        f"float {ceilings['float_bytes'] / 1e6:.0f} MB, int4 {ceilings['int4_bytes'] / 1e6:.0f} "
        f"MB; float32 matmul peak {ceilings['peak_flops'] / 1e9:.0f} GFLOP/s; torch threads "
        f"{torch.get_num_threads()}")
  runs = []
  for run in range(args.runs):
    rows = [row_record(row, sec, args, bench.cfg, ceilings)
            for row, sec in bench.measure().items()]
    columns = dict.fromkeys(k for r in rows for k in r)  # rows measure different things
    report.print_table(f"run {run + 1}/{args.runs}: JAX vs torch (ratio >= {TARGET_RATIO} wanted)",
                       [{k: r.get(k) for k in columns} for r in rows])
    runs.append(rows)
  summary = []
  for i, row in enumerate(args.rows):
    for key in ("ratio", "mm_ratio", "int4_ratio", "int4_over_float"):
      if key in runs[0][i]:
        values = [r[i][key] for r in runs]
        summary.append({"row": row, "measure": key, "median": statistics.median(values),
                        "runs": " ".join(f"{x:.2f}" for x in values)})
  report.print_table("medians over runs", summary)
  shift = None
  if args.matmul_dtype != "none" and args.shift_passages:
    shift = bench.logprob_shift(args.shift_passages)
    report.print_table(f"logprobs, matmul_dtype={args.matmul_dtype} vs float32", [shift])
  report.write_json(args.out, {"args": vars(args), "ceilings": ceilings, "runs": runs,
                               "summary": summary, "matmul_dtype_logprob_shift": shift})


if __name__ == "__main__":
  main()
