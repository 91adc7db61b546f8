r"""Rollout-loop throughput: the real agent loop with SmolLM2 on generated harder-ALFWorld games.

  python -m bench.rollout_loop [--live 8 16] [--steps 2] [--group_size 2] [--games_dir DIR \
      --split SPLIT] [--checkpoint DIR] [--max_turn_tokens 48] [--chunk_tokens 32] \
      [--no_warmup] [--out PATH]

`run_episodes` drives the JAX sampler (float32 SmolLM2-135M-Instruct, temperature 1) and a pool
of harder-ALFWorld engines, one per live episode, as one iteration of experiments/memex_grpo.py
does with its CPU config (1,536-token window, threshold 128, 48-token turns): `live` episodes,
`live / group_size` games (`--checkpoint` loads an export, e.g. the proof run's SFT policy, whose
turns range from a 20-id action to a 400-id compression). For each live count it runs three
sampler settings, each after an untimed identical warm-up run (compiles): whole turns without the
shared-prefix cache, whole turns with it, and turns decoded in chunks of `--chunk_tokens` with it;
it reports episodes per minute, generated tokens/s and where the wall time went:
- prefill, decode: the sampler's two device stages, waited on (`SamplerStats`);
- env: the pool's reset, step and release calls (worker round trips included);
- host: the rest (the loop's parsing, tokenizing and context bookkeeping, the sampler's slot
  planning and the host side of its calls).
The timers sit at the seams (the sampler's stage calls and a proxy around the env pool), never in
jitted code. `prefix_speedup` and `chunk_speedup` are wall-time ratios (prefix off / on, whole
turns / chunks) measured in this process.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Sequence

from bench import report
from memex_jax.agent import ChatRenderer, EpisodeSpec, run_episodes
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import generate
from memex_jax.envs.pooled import PooledEnv
from memex_jax import runs
from memex_jax.models.policy import load_policy
from memex_jax.sampling import Sampler, SamplerConfig

# experiments/configs/memex_grpo.py's CPU agent settings.
CPU_AGENT = dict(context_window=1536, threshold=128, max_turn_tokens=48, summary_token_budget=300)


class TimedPool:
  """An `EnvPool` whose start, step and release calls add their wall seconds to `seconds`."""

  def __init__(self, pool: Any):
    self.pool, self.seconds = pool, 0.0

  def __getattr__(self, name: str) -> Any:
    return getattr(self.pool, name)

  def _timed(self, method: str, *args: Any) -> Any:
    start = time.perf_counter()
    try:
      return getattr(self.pool, method)(*args)
    finally:
      self.seconds += time.perf_counter() - start

  def start(self, episodes):
    return self._timed("start", episodes)

  def step(self, commands):
    return self._timed("step", commands)

  def release(self, episode_ids):
    return self._timed("release", episode_ids)


def run_once(policy: tuple[Any, dict, Any], pool: TimedPool, games: Sequence[str], live: int,
             steps: int, group_size: int, share_prefix: bool, chunk_tokens: int,
             max_turn_tokens: int, seed: int = 0) -> dict[str, Any]:
  """One batch of `live` episodes (G = `group_size` rollouts per game) through `run_episodes`."""
  cfg, params, tokenizer = policy
  agent = smollm2_alfworld(max_steps=steps, **{**CPU_AGENT, "max_turn_tokens": max_turn_tokens})
  sampler = Sampler(cfg, params, tokenizer, SamplerConfig(
      num_slots=live, cache_length=agent.context_window, temperature=1.0, top_p=1.0, seed=seed,
      share_prefix=share_prefix, chunk_tokens=chunk_tokens))
  specs = [EpisodeSpec(PooledEnv(pool, i), games[(i // group_size) % len(games)],
                       group_id=i // group_size) for i in range(live)]
  pool.seconds = 0.0
  start = time.perf_counter()
  trajectories = run_episodes(sampler, specs, ChatRenderer(tokenizer), agent)
  wall = time.perf_counter() - start
  stats = sampler.stats
  host = wall - stats.prefill_s - stats.decode_s - pool.seconds
  return {"live": live, "share_prefix": share_prefix, "chunk_tokens": chunk_tokens,
          "episodes": len(trajectories),
          "steps": sum(t.metrics.steps for t in trajectories), "wall_s": wall,
          "episodes_per_min": 60.0 * len(trajectories) / wall,
          "generated_tokens_per_s": stats.generated_tokens / wall,
          "decode_tokens_per_s": stats.generated_tokens / max(stats.decode_s, 1e-9),
          "prefill_tokens_per_s": (stats.prefill_tokens + stats.prefix_tokens)
                                  / max(stats.prefill_s, 1e-9),
          "prefill_s": stats.prefill_s, "decode_s": stats.decode_s, "env_s": pool.seconds,
          "host_s": host, "sampler_calls": stats.calls,
          "generated_tokens": stats.generated_tokens, "prefill_tokens": stats.prefill_tokens,
          "prefix_tokens": stats.prefix_tokens, "reused_tokens": stats.reused_tokens,
          "errors": sum(bool(t.error) for t in trajectories)}


def bench_live(policy: tuple[Any, dict, Any], games: Sequence[str], live: int, steps: int,
               group_size: int, chunk_tokens: int, max_turn_tokens: int,
               warmup: bool = True) -> list[dict[str, Any]]:
  """Whole turns without and with prefix sharing, then chunked turns, on one pool of `live`
  harder-ALFWorld engines."""
  rows = []
  pool = TimedPool(alfworld_env.make_pool(num_workers=live, harder=True))
  try:
    for share, chunk in ((False, 0), (True, 0), (True, chunk_tokens)):
      if warmup:
        run_once(policy, pool, games, live, steps, group_size, share, chunk, max_turn_tokens)
      rows.append(run_once(policy, pool, games, live, steps, group_size, share, chunk,
                           max_turn_tokens))
  finally:
    pool.close()
  rows[1]["prefix_speedup"] = rows[0]["wall_s"] / rows[1]["wall_s"]
  rows[2]["chunk_speedup"] = rows[1]["wall_s"] / rows[2]["wall_s"]
  return rows


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--live", type=int, nargs="+", default=[8, 16], help="episodes at once")
  parser.add_argument("--steps", type=int, default=2, help="max steps per episode (CPU config)")
  parser.add_argument("--group_size", type=int, default=2, help="rollouts per game")
  parser.add_argument("--games_dir", default="", help="ALFWorld game root ('' = generate)")
  parser.add_argument("--split", default="train", help="the games' split")
  parser.add_argument("--checkpoint", default="", help="an export to load ('' = SmolLM2's own)")
  parser.add_argument("--max_turn_tokens", type=int, default=CPU_AGENT["max_turn_tokens"],
                      help="cap on a turn's ids")
  parser.add_argument("--chunk_tokens", type=int, default=32, help="ids per chunk of a turn")
  parser.add_argument("--no_warmup", action="store_true", help="time the compiling runs too")
  parser.add_argument("--out", default="bench/results/rollout_loop.json", help="JSON path")
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  cfg, params, tokenizer = load_policy()
  if args.checkpoint:
    params = runs.import_params(args.checkpoint, params)
  policy = (cfg, params, tokenizer)
  num_games = -(-max(args.live) // args.group_size)
  games = generate.games_for(args.games_dir, args.split, num=num_games, workers=2)
  rows = []
  for live in args.live:  # the record is rewritten after each live count: long runs show early
    rows += bench_live(policy, games, live, args.steps, args.group_size, args.chunk_tokens,
                       args.max_turn_tokens, warmup=not args.no_warmup)
    report.print_table("agent loop on harder ALFWorld (SmolLM2-135M, float32)", rows)
    report.write_json(args.out, {
        "command": " ".join(["python -m bench.rollout_loop", *argv]),
        "agent": CPU_AGENT, "rows": rows})


if __name__ == "__main__":
  main()
