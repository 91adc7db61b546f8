r"""Serve a model over an OpenAI-compatible chat-completions API.

  python -m memex_jax.serve --model smollm2 --port 8000
  python -m memex_jax.serve --model smollm2 --params /tmp/run/params --port 8000  # a trained run

Listens on 127.0.0.1 unless --host names another address. Needs the `serve` extra
(`pip install -e .[serve]`: starlette and uvicorn).
"""

from __future__ import annotations

import argparse

from memex_jax.sampling.config import SamplerConfig
from memex_jax.sampling.sampler import Sampler
from memex_jax.serve import model as model_lib
from memex_jax.serve.app import build_app
from memex_jax.serve.batching import SlotBatcher


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", default=model_lib.SMOLLM2,
                      help="'smollm2', a .gguf file or an HF folder")
  parser.add_argument("--params", default=None,
                      help="a <workdir>/params export of a project run, loaded over --model")
  parser.add_argument("--int4", action="store_true", help="serve int4 weights")
  parser.add_argument("--served_name", default=None, help="the id clients pass as `model`")
  parser.add_argument("--host", default="127.0.0.1",
                      help="listen address (loopback unless another is given explicitly)")
  parser.add_argument("--port", type=int, default=8000)
  parser.add_argument("--num_slots", type=int, default=8, help="requests decoded together")
  parser.add_argument("--cache_length", type=int, default=2048, help="the context window")
  parser.add_argument("--max_tokens", type=int, default=512,
                      help="cap on a reply when the request gives none")
  parser.add_argument("--prompt_bucket", type=int, default=64)
  parser.add_argument("--new_tokens_bucket", type=int, default=64)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--gather_ms", type=float, default=20.0,
                      help="how long a decode round waits for more requests to fill its slots")
  args = parser.parse_args(argv)

  import uvicorn  # pylint: disable=g-import-not-at-top  # the optional `serve` extra

  try:
    served = model_lib.load(args.model, args.params, args.int4, args.served_name)
  except (FileNotFoundError, ValueError) as e:
    raise SystemExit(f"cannot load the model: {e}") from None
  sampler = Sampler(served.config, served.params, served.tokenizer, SamplerConfig(
      num_slots=args.num_slots, cache_length=args.cache_length, prompt_bucket=args.prompt_bucket,
      new_tokens_bucket=args.new_tokens_bucket, seed=args.seed))
  batcher = SlotBatcher(sampler, gather_s=args.gather_ms / 1e3)
  app = build_app(served, batcher, default_max_tokens=args.max_tokens)
  print(f"serving {served.name} at http://{args.host}:{args.port}/v1 "
        f"({args.num_slots} slots, {args.cache_length}-token window)", flush=True)
  try:
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
  finally:
    batcher.close()


if __name__ == "__main__":
  main()
