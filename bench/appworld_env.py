r"""AppWorld engine latency and throughput on generated tasks, with the scripted solver as policy.

  python -m bench.appworld_env [--episodes 8] [--out bench/results/appworld_env.json]

Rows:
- worker: start-up of one AppWorld worker (venv interpreter listening), its first task world
  (importing appworld included), a reset to another task in the warm worker, and the latency of
  `execute` for plain Python, one read API call and one write API call;
- episodes: reference solutions played to the end (reset, every cell, scoring), by one env in
  this process and by an `EnvPool` of 2 workers stepped as a batch; episodes per minute and the
  pool's speed-up over the single env (measured in the same run).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time

from bench import report
from memex_jax.envs import pool as env_pool
from memex_jax.envs.appworld import env as appworld_env
from memex_jax.envs.appworld import generate
from memex_jax.envs.appworld import install
from memex_jax.envs.appworld import server
from memex_jax.envs.appworld import tasks as tasks_lib

_READ = ("tok = apis.simple_note.login(username=apis.supervisor.show_profile()['email'], "
         "password={a['account_name']: a['password'] for a in "
         "apis.supervisor.show_account_passwords()}['simple_note'])['access_token']")
_CALLS = {"python": "x = sum(range(1000))",
          "read_api": "n = apis.simple_note.search_notes(access_token=tok, page_limit=20)",
          "write_api": "apis.simple_note.update_note(access_token=tok, note_id=1, pinned=True)"}


def _ms(seconds: list[float]) -> float:
  return 1e3 * statistics.median(seconds)


def bench_worker(tasks: list[str], repeats: int) -> dict[str, float]:
  root, first_id = appworld_env.split_task(tasks[0])
  start = time.perf_counter()
  worker = server.WorkerProcess(root)
  row = {"start_ms": 1e3 * (time.perf_counter() - start)}
  try:
    start = time.perf_counter()
    worker.call("open", 300, task_id=first_id)
    row["first_open_ms"] = 1e3 * (time.perf_counter() - start)
    resets = []
    for task in tasks[1:] * repeats:
      start = time.perf_counter()
      worker.call("open", 300, task_id=appworld_env.split_task(task)[1])
      resets.append(time.perf_counter() - start)
    row["reset_ms"] = _ms(resets)
    worker.call("execute", 60, code=_READ)
    for name, code in _CALLS.items():
      times = []
      for _ in range(repeats * 5):
        start = time.perf_counter()
        worker.call("execute", 60, code=code)
        times.append(time.perf_counter() - start)
      row[f"execute_{name}_ms"] = _ms(times)
  finally:
    worker.close()
  return row


def bench_single(tasks: list[str], episodes: int) -> dict[str, float]:
  env = appworld_env.AppWorldEnv()
  try:
    env.reset(tasks[0])  # worker start-up is not part of the measurement
    won, start = 0, time.perf_counter()
    for i in range(episodes):
      task = tasks[i % len(tasks)]
      env.reset(task)
      for cell in generate.read_json(task, "solution"):
        _, done, was_won, _ = env.step(cell)
      won += done and was_won
    wall_s = time.perf_counter() - start
  finally:
    env.close()
  return {"episodes": episodes, "won": won, "episodes_per_min": 60 * episodes / wall_s}


def bench_pool(tasks: list[str], episodes: int, workers: int) -> dict[str, float]:
  factory = functools.partial(appworld_env.AppWorldEnv, appworld_env.AppWorldConfig())
  schedule = env_pool.episode_schedule(tasks, episodes, seed=0)
  solutions = {t: generate.read_json(t, "solution") for t in tasks}
  with env_pool.EnvPool(factory, workers, step_timeout_s=120, reset_timeout_s=300) as pool:
    warmup = [env_pool.PoolEpisode(-1 - i, tasks[0]) for i in range(workers)]
    pool.start(warmup)  # worker start-up is not part of the measurement
    pool.release([e.episode_id for e in warmup])
    won, start = 0, time.perf_counter()
    for first in range(0, episodes, workers):
      chunk = {e.episode_id: e.task for e in schedule[first:first + workers]}
      started = pool.start([env_pool.PoolEpisode(i, t) for i, t in chunk.items()])
      running = {r.episode_id: 0 for r in started if not r.failed}
      while running:
        results = pool.step({i: solutions[chunk[i]][n] for i, n in running.items()})
        for r in results:
          if r.done:
            won += r.won
            del running[r.episode_id]
          else:
            running[r.episode_id] += 1
    wall_s = time.perf_counter() - start
  return {"episodes": episodes, "won": won, "episodes_per_min": 60 * episodes / wall_s}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--episodes", type=int, default=8)
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", default="bench/results/appworld_env.json", help="JSON path")
  args = parser.parse_args()
  start = time.perf_counter()
  install.ensure_installed()
  install_s = time.perf_counter() - start
  with tempfile.TemporaryDirectory() as folder:
    start = time.perf_counter()
    num_tasks = len(tasks_lib.TASK_TYPES)  # one task of each type
    tasks = generate.generate(folder, num=num_tasks, seed=0, splits=("train",))["train"]
    generate_s = time.perf_counter() - start
    worker = bench_worker(tasks, args.repeats)
    single = bench_single(tasks, args.episodes)
    pooled = bench_pool(tasks, args.episodes, args.workers)
  episodes = [{"mode": "single", "workers": 1, **single, "speedup_vs_single": 1.0},
              {"mode": "pool", "workers": args.workers, **pooled,
               "speedup_vs_single": pooled["episodes_per_min"] / single["episodes_per_min"]}]
  report.print_table("AppWorld worker latencies", [worker])
  report.print_table("AppWorld episodes (scripted solver as policy)", episodes)
  report.write_json(args.out, {
      "command": "python -m bench.appworld_env " + " ".join(
          f"--{key} {value}" for key, value in vars(args).items()),
      "install_check_s": install_s, "generated_tasks": num_tasks, "generate_s": generate_s,
      "rows": [{"mode": "worker", **worker}] + episodes})


if __name__ == "__main__":
  main()
