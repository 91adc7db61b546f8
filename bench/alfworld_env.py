r"""ALFWorld engine throughput: resets/s and steps/s, single process and pooled.

  python -m bench.alfworld_env [--workers 2] [--episodes 6] [--steps 20] [--json PATH]

Two scene sizes, both generated here on shipped floor plans: "small" (the floor plan with the
fewest receptacles) and "alfred" (the most: ALFRED-sized kitchens). Steps are random admissible
commands, so every step is a real engine transition.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import tempfile
import time

from memex_jax.envs.alfworld import catalog
from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import layouts
from memex_jax.envs.alfworld import pddl
from memex_jax.envs.alfworld import pool as env_pool
from memex_jax.envs.alfworld import sampling


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
    warmup = [env_pool.Episode(-1 - i, games[0]) for i in range(workers)]
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


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
  parser.add_argument("--episodes", type=int, default=6)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--json", default=os.path.join(tempfile.gettempdir(),
                                                     "alfworld_env_bench.json"))
  args = parser.parse_args()
  rows = []
  with tempfile.TemporaryDirectory() as folder:
    for size in ("small", "alfred"):
      games = scene_games(folder, size, count=3)
      rows.append({"scene": size, "mode": "single", "workers": 1,
                   **bench_single(games, args.episodes, args.steps)})
      rows.append({"scene": size, "mode": "pool", "workers": args.workers,
                   **bench_pool(games, args.workers, args.episodes, args.steps)})
  header = f"{'scene':>7} {'mode':>7} {'workers':>7} {'resets/s':>9} {'steps/s':>9} " \
           f"{'reset ms':>9} {'step ms':>8}"
  print(header)
  for r in rows:
    print(f"{r['scene']:>7} {r['mode']:>7} {r['workers']:>7} {r['resets_per_s']:9.2f} "
          f"{r['steps_per_s']:9.1f} {r['reset_ms']:9.0f} {r['step_ms']:8.1f}")
  with open(args.json, "w") as f:
    json.dump({"benchmark": "alfworld_env", "cpu_count": os.cpu_count(), "rows": rows}, f,
              indent=1)
  print(f"wrote {args.json}")


if __name__ == "__main__":
  main()
