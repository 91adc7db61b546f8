"""How far int4 moves the policy: KL(float || int4) of next-token distributions on real text.

  python -m bench.int4_kl                               # SmolLM2-135M-Instruct, groups 32-192
  python -m bench.int4_kl --hf_folder /path/to/Qwen2.5-0.5B-Instruct --groups 32 64 128

Prompts are `--prompts` passages of the Python reference manual's help topics (shipped with
every CPython as `pydoc_data`), `--tokens` ids each, teacher-forced through the float model and
through its int4 QAT forward at each group size. A prompt's KL is the mean over its positions;
the figure reported is the mean over prompts (with the max).
"""

from __future__ import annotations

import argparse
import functools
import statistics

import jax
import jax.numpy as jnp
import numpy as np
from pydoc_data import topics

from bench import report
from memex_jax.models import gguf_io
from memex_jax.models import hf_io
from memex_jax.models import transformer
from memex_jax.models.config import ModelConfig
from memex_jax.models.pretrained import smollm2_gguf_path
from memex_jax.tokenizers import Tokenizer


def reference_passages(tokenizer: Tokenizer, count: int, length: int) -> np.ndarray:
  """[count length] ids: the opening `length` tokens of the longest help topics, one per topic."""
  texts = sorted(topics.topics.values(), key=len, reverse=True)
  rows = [ids[:length] for ids in map(tokenizer.encode, texts) if len(ids) >= length][:count]
  if len(rows) < count:
    raise ValueError(f"only {len(rows)} help topics have {length} tokens; ask for fewer")
  return np.asarray(rows, np.int32)


def next_token_kl(cfg: ModelConfig, params: dict, tokens: np.ndarray, groups: list[int],
                  batch: int) -> dict[int, np.ndarray]:
  """Per-prompt mean KL(float || int4 at group g) over tokens [N T], for each g: {g: [N]}."""
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.int32), (batch,
                                                                              tokens.shape[1]))

  @functools.partial(jax.jit, static_argnums=0)
  def log_probs(c: ModelConfig, params: dict, ids: jax.Array) -> jax.Array:
    logits, _ = transformer.Transformer(c).apply({"params": params}, ids, positions)
    return jax.nn.log_softmax(logits, axis=-1)  # b T V

  out = {g: [] for g in groups}
  for start in range(0, len(tokens) - batch + 1, batch):
    ids = jnp.asarray(tokens[start:start + batch])
    ref = log_probs(cfg, params, ids)
    for g in groups:
      q = log_probs(cfg.replace(quant="int4_qat", int4_group=g), params, ids)
      out[g].append(np.asarray(jnp.mean(jnp.sum(jnp.exp(ref) * (ref - q), -1), -1)))  # b
  return {g: np.concatenate(v) for g, v in out.items()}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--hf_folder", default=None, help="a HF checkpoint instead of SmolLM2")
  parser.add_argument("--groups", type=int, nargs="+", default=[32, 64, 96, 192],
                      help="SmolLM2's widths 576/1536 take 32..192; Qwen2.5's 896/4864 32..128")
  parser.add_argument("--prompts", type=int, default=64, help="a multiple of --batch")
  parser.add_argument("--tokens", type=int, default=64)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  if args.hf_folder:
    cfg, params = hf_io.load_hf(args.hf_folder)
    tokenizer, name = Tokenizer.from_pretrained(args.hf_folder), args.hf_folder.rstrip("/").split("/")[-1]
  else:
    cfg, params = gguf_io.load_gguf(smollm2_gguf_path())
    tokenizer, name = Tokenizer.from_gguf(smollm2_gguf_path()), "smollm2_135m_q4_1"
  tokens = reference_passages(tokenizer, args.prompts, args.tokens)
  kls = next_token_kl(cfg, jax.device_put(params), tokens, args.groups, args.batch)
  rows = [{"model": name, "group": g, "prompts": len(v), "tokens": args.tokens,
           "mean_kl": float(np.mean(v)), "median_kl": statistics.median(v.tolist()),
           "max_kl": float(np.max(v))} for g, v in kls.items()]
  report.print_table("KL(float || int4), nats per token", rows)
  report.write_json(args.out or f"bench/results/int4_kl_{name}.json", {"rows": rows})


if __name__ == "__main__":
  main()
