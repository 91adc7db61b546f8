r"""ALFWorld engine throughput: resets/s and steps/s, single process, pooled, and agent loop.

  python -m bench.alfworld_env [--workers 2] [--episodes 6] [--steps 20] [--out PATH]

Two scene sizes, both generated here on shipped floor plans: "small" (the floor plan with the
fewest receptacles) and "alfred" (the most: ALFRED-sized kitchens). Steps are random admissible
commands, so every step is a real engine transition. Three modes:
- single: one engine in this process;
- pool: `EnvPool` batches of `workers` episodes, stepped together;
- loop: the agent loop (`run_episodes`) over `PooledEnv` views of a pool, `workers` episodes per
  call, with a scripted policy that calls `execute` on a random admissible command: the rollout
  cost without the model (tokenizing, parsing, context bookkeeping and the batched env calls of
  `envs.batch`). Its steps/s count the episodes' resets in the wall time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import tempfile
import time

from bench import report
from memex_jax.agent import ChatRenderer, EpisodeSpec, ScriptedPolicy, run_episodes
from memex_jax.envs.alfworld import catalog
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import layouts
from memex_jax.envs.alfworld import pddl
from memex_jax.envs import pool as env_pool
from memex_jax.envs.alfworld import sampling
from memex_jax.envs.pooled import PooledEnv
from memex_jax.models import pretrained
from memex_jax.tokenizers import Tokenizer


def scene_games(folder: str, size: str, count: int) -> list[str]:
  """Writes `count` pick_and_place games on the smallest or largest train floor plan."""
  plans = [layouts.load_floor_plan(n) for n in layouts.floor_plan_numbers("train")]
  pick = min if size == "small" else max
  plan = pick(plans, key=lambda p: (len(p.receptacles), p.number))
  rng = random.Random(0)
  folders = []
  while len(folders) < count:
    spec = sampling.sample_game(plan, catalog.TASK_TYPES[0], rng)
    if spec is not None:
      game = os.path.join(folder, f"{size}_{len(folders)}")
      pddl.write_game(spec, game, name=os.path.basename(game))
      folders.append(game)
  return folders


def bench_single(games: list[str], episodes: int, steps: int) -> dict[str, float]:
  env = alfworld_env.AlfWorldEnv()
  rng = random.Random(0)
  reset_s = step_s = 0.0
  n_steps = 0
  for i in range(episodes):
    start = time.perf_counter()
    _, observation = env.reset(games[i % len(games)])
    reset_s += time.perf_counter() - start
    commands = admissible(observation)
    for _ in range(steps):
      start = time.perf_counter()
      observation, done, _, _ = env.step(rng.choice(commands))
      step_s += time.perf_counter() - start
      n_steps += 1
      if done:
        break
      commands = admissible(observation)
  return {"resets_per_s": episodes / reset_s, "steps_per_s": n_steps / step_s,
          "reset_ms": 1e3 * reset_s / episodes, "step_ms": 1e3 * step_s / n_steps}


def bench_pool(games: list[str], workers: int, episodes: int, steps: int) -> dict[str, float]:
  """Batches of `workers` episodes; per-episode latencies are wall time x workers / count."""
  factory = functools.partial(alfworld_env.AlfWorldEnv, alfworld_env.AlfWorldConfig())
  rng = random.Random(0)
  schedule = env_pool.episode_schedule(games, episodes, seed=0)
  with env_pool.EnvPool(factory, workers) as pool:
    warmup = [env_pool.PoolEpisode(-1 - i, games[0]) for i in range(workers)]
    pool.start(warmup)  # worker start-up (imports) is not part of the measurement
    pool.release([e.episode_id for e in warmup])
    reset_s = step_s = 0.0
    n_steps = 0
    for first in range(0, episodes, workers):
      start = time.perf_counter()
      started = pool.start(schedule[first:first + workers])
      reset_s += time.perf_counter() - start
      commands = {r.episode_id: admissible(r.observation) for r in started if not r.failed}
      for _ in range(steps):
        if not commands:
          break
        start = time.perf_counter()
        results = pool.step({i: rng.choice(c) for i, c in commands.items()})
        step_s += time.perf_counter() - start
        n_steps += len(results)
        commands = {r.episode_id: admissible(r.observation) for r in results if not r.done}
      pool.release(list(commands))
  return {"resets_per_s": episodes / reset_s, "steps_per_s": n_steps / step_s,
          "reset_ms": 1e3 * reset_s * workers / episodes,
          "step_ms": 1e3 * step_s * workers / n_steps}


def admissible(observation: str) -> list[str]:
  """The commands the plain wrapper lists at the end of an observation."""
  listing = observation.rsplit("Admissible commands: ", 1)[1]
  return listing.removesuffix(".").split(", ")


def bench_loop(games: list[str], workers: int, episodes: int, steps: int) -> dict[str, float]:
  """`run_episodes` over pooled envs, `workers` episodes per call, `steps` random actions each."""
  renderer = ChatRenderer(Tokenizer.from_gguf(pretrained.smollm2_gguf_path()))
  config = smollm2_alfworld(max_steps=steps, context_window=1 << 20,
                                               threshold=1 << 19)
  rng = random.Random(0)

  def random_action(context: str) -> str:
    arguments = {"command": rng.choice(admissible(context))}
    return f"Act.\n<tool_call>\n{json.dumps({'name': config.env_tool, 'arguments': arguments})}" \
           "\n</tool_call>"

  schedule = env_pool.episode_schedule(games, episodes, seed=0)
  factory = functools.partial(alfworld_env.AlfWorldEnv, alfworld_env.AlfWorldConfig())
  with env_pool.EnvPool(factory, workers) as pool:
    warmup = [env_pool.PoolEpisode(-1 - i, games[0]) for i in range(workers)]
    pool.start(warmup)  # worker start-up (imports) is not part of the measurement
    pool.release([e.episode_id for e in warmup])
    n_steps, start = 0, time.perf_counter()
    for first in range(0, episodes, workers):
      chunk = schedule[first:first + workers]
      policy = ScriptedPolicy(renderer, [[random_action] * steps] * len(chunk))
      trajectories = run_episodes(policy, [EpisodeSpec(PooledEnv(pool, i), e.task)
                                           for i, e in enumerate(chunk)], renderer, config)
      n_steps += sum(t.metrics.steps for t in trajectories)
    wall_s = time.perf_counter() - start
  return {"steps_per_s": n_steps / wall_s, "step_ms": 1e3 * wall_s * workers / n_steps}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
  parser.add_argument("--episodes", type=int, default=6)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--out", default="bench/results/alfworld_env.json", help="JSON path")
  args = parser.parse_args()
  rows = []
  with tempfile.TemporaryDirectory() as folder:
    for size in ("small", "alfred"):
      games = scene_games(folder, size, count=3)
      rows.append({"scene": size, "mode": "single", "workers": 1,
                   **bench_single(games, args.episodes, args.steps)})
      for mode, run in (("pool", bench_pool), ("loop", bench_loop)):
        rows.append({"scene": size, "mode": mode, "workers": args.workers,
                     **run(games, args.workers, args.episodes, args.steps)})
  report.print_table("ALFWorld engine (per-episode ms: wall x workers / count)", rows)
  report.write_json(args.out, {"command": "python -m bench.alfworld_env " + " ".join(
      f"--{key} {value}" for key, value in vars(args).items()), "rows": rows})


if __name__ == "__main__":
  main()
