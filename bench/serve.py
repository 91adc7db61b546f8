r"""Chat-completions server throughput: requests/s and tokens/s at 1, 4 and 16 concurrent clients.

  python -m bench.serve [--clients 1,4,16] [--requests_per_client 2] [--max_tokens 16] \
      [--num_slots 8] [--out PATH]

The server (`python -m memex_jax.serve`, SmolLM2 from its wheel) runs as a child process on
127.0.0.1; each client is a thread sending greedy requests one after another, each a different
short question. The reference is the local sampler in this process on the same prompts, with
the same sampler settings, decoding as many prompts at once as the clients could have in flight
(min(clients, slots)): the server's tokens/s over the local sampler's is what HTTP, JSON and the
batcher cost. Every request first runs once untimed, so compilation is not measured.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import time
import urllib.request

import jax

from bench import report
from memex_jax.agent.chat import ChatRenderer, Message
from memex_jax.sampling import Sampler, SamplerConfig, complete
from memex_jax.serve import model as model_lib
from memex_jax.serve.process import ServerProcess

SUBJECTS = ("apples", "chairs", "rivers", "stars", "books", "clouds", "doors", "lamps")


def questions(n: int) -> list[str]:
  return [f"Write one sentence about {SUBJECTS[i % len(SUBJECTS)]} (request {i})."
          for i in range(n)]


def _post(url: str, model: str, question: str, max_tokens: int) -> int:
  """One greedy request; returns its completion tokens."""
  body = {"model": model, "messages": [{"role": "user", "content": question}],
          "max_tokens": max_tokens, "temperature": 0}
  request = urllib.request.Request(f"{url}/chat/completions", json.dumps(body).encode(),
                                   {"Content-Type": "application/json"})
  with urllib.request.urlopen(request, timeout=600) as response:
    return json.loads(response.read())["usage"]["completion_tokens"]


def bench_server(server: ServerProcess, clients: int, prompts: list[str],
                 max_tokens: int) -> dict[str, float]:
  """`clients` threads share `prompts`, one request in flight each."""
  with concurrent.futures.ThreadPoolExecutor(clients) as pool:
    list(pool.map(lambda q: _post(server.url, server.model, q, max_tokens), prompts))  # warm-up
    start = time.perf_counter()
    tokens = sum(pool.map(lambda q: _post(server.url, server.model, q, max_tokens), prompts))
    seconds = time.perf_counter() - start
  return {"requests": len(prompts), "server_s": seconds,
          "server_requests_per_s": len(prompts) / seconds,
          "server_tokens_per_s": tokens / seconds}


def bench_local(sampler: Sampler, renderer: ChatRenderer, width: int, prompts: list[str],
                max_tokens: int) -> float:
  """Tokens/s of the local sampler decoding `prompts` `width` at a time."""
  ids = [renderer.prompt_ids([Message("user", q)]) for q in prompts]

  def run() -> int:
    return sum(len(t.ids) for first in range(0, len(ids), width)
               for t in complete(sampler, ids[first:first + width],
                                 [max_tokens] * len(ids[first:first + width])))

  run()  # warm-up
  start = time.perf_counter()
  tokens = run()
  return tokens / (time.perf_counter() - start)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--clients", default="1,4,16")
  parser.add_argument("--requests_per_client", type=int, default=2)
  parser.add_argument("--max_tokens", type=int, default=16)
  parser.add_argument("--num_slots", type=int, default=8)
  parser.add_argument("--cache_length", type=int, default=512)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  config = SamplerConfig(num_slots=args.num_slots, cache_length=args.cache_length,
                         prompt_bucket=64, new_tokens_bucket=16, temperature=0.0)
  flags = ["--num_slots", str(config.num_slots), "--cache_length", str(config.cache_length),
           "--prompt_bucket", str(config.prompt_bucket), "--new_tokens_bucket",
           str(config.new_tokens_bucket)]
  served = model_lib.load(model_lib.SMOLLM2)
  sampler = Sampler(served.config, served.params, served.tokenizer, config)
  renderer = ChatRenderer(served.tokenizer)
  rows = []
  with ServerProcess(flags) as server:
    for clients in (int(c) for c in args.clients.split(",")):
      prompts = questions(clients * args.requests_per_client)
      row = {"clients": clients, **bench_server(server, clients, prompts, args.max_tokens)}
      width = min(clients, config.num_slots)
      row["local_batch"] = width
      row["local_tokens_per_s"] = bench_local(sampler, renderer, width, prompts, args.max_tokens)
      row["server_over_local"] = row["server_tokens_per_s"] / row["local_tokens_per_s"]
      rows.append(row)
  report.print_table(f"chat-completions server vs local sampler ({jax.default_backend()})", rows)
  report.write_json(args.out or f"bench/results/serve_{jax.default_backend()}.json",
                    {"rows": rows, "max_tokens": args.max_tokens,
                     "sampler": {"num_slots": config.num_slots,
                                 "cache_length": config.cache_length}})


if __name__ == "__main__":
  main()
