"""GGUF file -> HF folder (config, safetensors, tokenizer) that transformers loads.

  python -m memex_jax.models.convert --gguf FILE.gguf --out DIR [--dtype float32]

The weights are dequantised once here, so later loads read plain safetensors in seconds.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from memex_jax.models import gguf_io
from memex_jax.models import hf_io
from memex_jax.tokenizers import Tokenizer

GENERATION_CONFIG_FILE = "generation_config.json"
DTYPES = ("float32", "bfloat16", "float16")


def convert(gguf_path: str | pathlib.Path, out_dir: str | pathlib.Path,
            dtype: str = "float32") -> pathlib.Path:
  """Writes the model and tokenizer of `gguf_path` as an HF folder; returns the folder.

  Args:
    gguf_path: a llama/qwen2/qwen3 GGUF file (any quantisation gguf can dequantise).
    out_dir: created if missing; existing files of the same names are overwritten.
    dtype: storage dtype of the safetensors weights.
  """
  gguf_path = pathlib.Path(gguf_path)
  cfg, params = gguf_io.load_gguf(gguf_path, dtype)
  tokenizer = Tokenizer.from_gguf(gguf_path)
  tokenizer.check_matches(cfg.vocab_size, str(gguf_path))
  special = {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id,
             "pad_token_id": tokenizer.pad_id}
  special = {k: v for k, v in special.items() if v is not None}
  out = hf_io.save_hf(out_dir, cfg.replace(param_dtype=dtype), params, extra_config=special)
  (out / GENERATION_CONFIG_FILE).write_text(json.dumps(special, indent=2) + "\n")
  tokenizer.save_pretrained(out)
  return out


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--gguf", required=True, help="input .gguf file")
  parser.add_argument("--out", required=True, help="output folder")
  parser.add_argument("--dtype", default="float32", choices=DTYPES, help="weight storage dtype")
  args = parser.parse_args(argv)
  try:
    out = convert(args.gguf, args.out, args.dtype)
  except (OSError, ValueError) as e:  # missing files, bad metadata, unsupported models
    print(f"error: {e}", file=sys.stderr)
    return 1
  print(f"wrote {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
