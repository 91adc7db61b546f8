"""Runs N environments in worker processes, stepped as a batch, surviving crashed or hung workers.

Each worker owns one env (ALFWorld's engine is process-global, so one per process). A batch
call sends every request first and then waits for all replies against one deadline. A worker
that dies or misses the deadline is killed and replaced; only its episode ends, as failed with
the reason. Episodes are placed on workers in episode-id order, and results come back in
episode-id order, so a run is reproducible for a seed.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
from multiprocessing import connection
import random
import time
import traceback
from typing import Any, Callable, Mapping, Sequence

from memex_jax.envs import base


@dataclasses.dataclass(frozen=True)
class PoolEpisode:
  """One episode to play: a stable id and the task handed to `Env.reset`."""

  episode_id: int
  task: Any


@dataclasses.dataclass(frozen=True)
class StartResult:
  """Outcome of starting an episode (`failed` carries `reason`; the episode did not start)."""

  episode_id: int
  task_text: str = ""
  observation: str = ""
  failed: bool = False
  reason: str = ""


@dataclasses.dataclass(frozen=True)
class StepResult:
  """Outcome of one step. A failed step ends its episode (done=True, won=False)."""

  episode_id: int
  observation: str = ""
  done: bool = True
  won: bool = False
  info: dict[str, Any] = dataclasses.field(default_factory=dict)
  failed: bool = False
  reason: str = ""


def episode_schedule(tasks: Sequence[Any], num_episodes: int, seed: int) -> list[PoolEpisode]:
  """Deterministic episodes for a seed: passes over `tasks`, each pass shuffled by the seed."""
  if not tasks:
    raise ValueError("episode_schedule needs at least one task")
  rng = random.Random(seed)
  order: list[Any] = []
  while len(order) < num_episodes:
    chunk = list(tasks)
    rng.shuffle(chunk)
    order.extend(chunk)
  return [PoolEpisode(i, task) for i, task in enumerate(order[:num_episodes])]


def _worker_main(conn: connection.Connection, env_factory: Callable[[], base.Env]) -> None:
  env = env_factory()
  while True:
    try:
      op, arg = conn.recv()
    except EOFError:
      return
    if op == "close":
      return
    if op == "ping":
      conn.send(("ok", "pong"))
      continue
    try:
      result = env.reset(arg) if op == "reset" else env.step(arg)
      conn.send(("ok", result))
    except Exception as e:  # Reported to the pool as this episode's failure reason.
      conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"))


class _Worker:
  """A worker process and the parent's end of its pipe."""

  def __init__(self, ctx, env_factory: Callable[[], base.Env]):
    self.conn, child = ctx.Pipe()
    self.process = ctx.Process(target=_worker_main, args=(child, env_factory), daemon=True)
    self.process.start()
    child.close()

  def answers(self, timeout_s: float) -> bool:
    """Whether the idle worker replies to a ping within `timeout_s`. A round trip is the only
    certain test: `is_alive` and an end-of-file on the pipe were both seen to lag behind a
    SIGKILL under load, so the next reset met a dead worker."""
    try:
      self.conn.send(("ping", None))
      return self.conn.poll(timeout_s) and self.conn.recv() == ("ok", "pong")
    except (EOFError, OSError):
      return False

  def kill(self) -> None:
    if self.process.is_alive():
      self.process.kill()
    self.process.join(timeout=10)
    self.conn.close()


class EnvPool:
  """N envs in worker processes.

  Attributes:
    num_workers: how many episodes can run at once.
    step_timeout_s: deadline of a `step` batch; a worker that misses it is killed.
    reset_timeout_s: deadline of a `start` batch (loading a large game takes seconds).
    restarts: how many workers have been replaced so far.
  """

  def __init__(self, env_factory: Callable[[], base.Env], num_workers: int,
               step_timeout_s: float = 30.0, reset_timeout_s: float = 120.0):
    if num_workers < 1:
      raise ValueError(f"EnvPool needs at least one worker, got {num_workers}")
    self.num_workers = num_workers
    self.step_timeout_s = step_timeout_s
    self.reset_timeout_s = reset_timeout_s
    self._env_factory = env_factory
    self._ctx = multiprocessing.get_context("spawn")
    self._workers = [_Worker(self._ctx, env_factory) for _ in range(num_workers)]
    self._slot_of: dict[int, int] = {}  # running episode id -> worker slot
    self.restarts = 0

  def worker_pid(self, episode_id: int) -> int:
    """Process id of the worker running an episode."""
    return self._workers[self._slot_of[episode_id]].process.pid

  @property
  def running(self) -> list[int]:
    return sorted(self._slot_of)

  def start(self, episodes: Sequence[PoolEpisode]) -> list[StartResult]:
    """Resets a free worker for each episode; results in episode-id order.

    With more episodes than free workers, the lowest ids start and the rest fail alone (their
    results say that every worker is busy).

    Raises:
      ValueError: an episode id is already running or given twice.
    """
    episodes = sorted(episodes, key=lambda e: e.episode_id)
    clashes = [e.episode_id for e in episodes if e.episode_id in self._slot_of]
    if clashes or len({e.episode_id for e in episodes}) < len(episodes):
      raise ValueError(f"episode ids must be new and distinct; running already: {clashes}")
    free = sorted(set(range(self.num_workers)) - set(self._slot_of.values()))
    starting = episodes[:len(free)]
    for episode, slot in zip(starting, free):
      if not self._workers[slot].answers(self.reset_timeout_s):  # died idle: no episode lost
        self._respawn(slot)
      self._slot_of[episode.episode_id] = slot
    replies = self._exchange({e.episode_id: ("reset", e.task) for e in starting},
                             self.reset_timeout_s)
    results = []
    for episode in episodes:
      ok, payload = replies.get(episode.episode_id, (
          False, f"all {self.num_workers} workers of the pool are running episodes"))
      if ok:
        results.append(StartResult(episode.episode_id, *payload))
      else:
        self._slot_of.pop(episode.episode_id, None)
        results.append(StartResult(episode.episode_id, failed=True, reason=payload))
    return results

  def step(self, commands: Mapping[int, str]) -> list[StepResult]:
    """Steps each running episode by its command; results in episode-id order.

    An episode whose result is done (or failed) frees its worker.
    """
    unknown = set(commands) - set(self._slot_of)
    if unknown:
      raise KeyError(f"episodes {sorted(unknown)} are not running")
    replies = self._exchange({i: ("step", c) for i, c in commands.items()}, self.step_timeout_s)
    results = []
    for episode_id in sorted(commands):
      ok, payload = replies[episode_id]
      if ok:
        observation, done, won, info = payload
        result = StepResult(episode_id, observation, bool(done), bool(won), info)
      else:
        result = StepResult(episode_id, failed=True, reason=payload)
      if result.done:
        del self._slot_of[episode_id]
      results.append(result)
    return results

  def release(self, episode_ids: Sequence[int]) -> None:
    """Frees the workers of episodes the caller ends early (e.g. the agent called Finish)."""
    for episode_id in episode_ids:
      self._slot_of.pop(episode_id, None)

  def _exchange(self, requests: Mapping[int, tuple[str, Any]],
                timeout_s: float) -> dict[int, tuple[bool, Any]]:
    """Sends every request, then collects replies until `timeout_s`; replaces failed workers."""
    replies: dict[int, tuple[bool, Any]] = {}
    waiting: dict[Any, int] = {}
    for episode_id, request in requests.items():
      worker = self._workers[self._slot_of[episode_id]]
      try:
        worker.conn.send(request)
        waiting[worker.conn] = episode_id
      except (BrokenPipeError, ConnectionResetError, OSError):
        replies[episode_id] = (False, self._replace(episode_id, "worker crashed"))
    deadline = time.monotonic() + timeout_s
    while waiting:
      ready = connection.wait(list(waiting), timeout=max(0.0, deadline - time.monotonic()))
      if not ready:
        break
      for conn in ready:
        episode_id = waiting.pop(conn)
        try:
          status, payload = conn.recv()
          replies[episode_id] = (status == "ok", payload)
        except (EOFError, ConnectionResetError, OSError):
          replies[episode_id] = (False, self._replace(episode_id, "worker crashed"))
    for episode_id in waiting.values():
      reason = f"worker hung: no reply within {timeout_s:.1f} s"
      replies[episode_id] = (False, self._replace(episode_id, reason))
    return replies

  def _replace(self, episode_id: int, reason: str) -> str:
    slot = self._slot_of[episode_id]
    worker = self._workers[slot]
    worker.process.join(timeout=0.5)
    exitcode = worker.process.exitcode
    self._respawn(slot)
    return reason if exitcode is None else f"{reason} (exit code {exitcode})"

  def _respawn(self, slot: int) -> None:
    self._workers[slot].kill()
    self._workers[slot] = _Worker(self._ctx, self._env_factory)
    self.restarts += 1

  def close(self) -> None:
    for worker in self._workers:
      try:
        worker.conn.send(("close", None))
      except OSError:
        pass
    for worker in self._workers:
      worker.process.join(timeout=5)
      worker.kill()
    self._slot_of.clear()

  def __enter__(self) -> "EnvPool":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
