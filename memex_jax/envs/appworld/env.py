"""AppWorld on its real engine, behind the Env seam: the action is Python calling `apis.*`.

The engine runs out of process (`server.WorkerProcess`, in AppWorld's own venv); this class is
only its client, so it is safe in the trainer and in `pool.EnvPool` workers alike. A task is the
folder of one task world, `<root>/data/tasks/<task_id>` (generated or official). The episode ends
when the code calls `apis.supervisor.complete_task(...)` or at the step limit; its score is the
fraction of the task's checks that pass, and it is won when all pass. A worker that dies or hangs,
or an episode over its time limit, ends the episode lost with the reason; the next `reset`
starts a fresh worker.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import time
from typing import Any

from memex_jax.envs import pool as pool_lib
from memex_jax.envs.appworld import server

EPISODE_OVER = "The episode is over. Reset the environment to start a new one."


@dataclasses.dataclass(frozen=True)
class AppWorldConfig:
  """Options of the AppWorld env.

  Attributes:
    max_steps: the episode ends (and is scored) after this many code executions.
    call_timeout_s: AppWorld's own limit on one execution; the worker is killed if it has not
      answered `call_margin_s` later.
    call_margin_s: grace beyond `call_timeout_s` before the worker counts as hung.
    episode_timeout_s: hard wall-clock limit of one episode, from reset.
    start_timeout_s: how long a new worker may take to listen, and a task world to open.
    max_observation_chars: longer outputs are clipped, and the clip is reported.
    official: score with AppWorld's official evaluation (tasks with official ground truth).
    python: the AppWorld venv's interpreter (None: the cached one of `install`).
  """

  max_steps: int = 40
  call_timeout_s: int = 30
  call_margin_s: float = 15.0
  episode_timeout_s: float = 900.0
  start_timeout_s: float = 180.0
  max_observation_chars: int = 4000
  official: bool = False
  python: str | None = None

  def __post_init__(self):
    if self.max_steps < 1 or self.call_timeout_s < 1 or self.episode_timeout_s <= 0:
      raise ValueError(f"AppWorldConfig needs positive limits, got {self}")


def make_pool(num_workers: int, harder: bool = True,
              step_timeout_s: float = 60.0) -> pool_lib.EnvPool:
  """One AppWorld client per worker process (each starts its own engine worker on reset).

  `harder` is ALFWorld's variant switch, taken so that every family's pool reads the same
  config section; AppWorld has one variant and ignores it.
  """
  del harder
  config = AppWorldConfig()
  # A reset may start a fresh engine worker, which may take `start_timeout_s` to listen.
  return pool_lib.EnvPool(functools.partial(AppWorldEnv, config), num_workers,
                          step_timeout_s=max(step_timeout_s,
                                             config.call_timeout_s + config.call_margin_s),
                          reset_timeout_s=2 * config.start_timeout_s)


def split_task(task: str) -> tuple[str, str]:
  """(root, task_id) of a task folder `<root>/data/tasks/<task_id>`."""
  folder = pathlib.Path(task).resolve()
  if folder.parent.name != "tasks" or folder.parents[1].name != "data":
    raise ValueError(f"an AppWorld task is a folder <root>/data/tasks/<task_id>, got {task!r}")
  return str(folder.parents[2]), folder.name


def dataset_tasks(root: str, split: str) -> list[str]:
  """The task folders of a split listed in `<root>/data/datasets/<split>.txt` (generated worlds
  and the official data alike)."""
  with open(os.path.join(root, "data", "datasets", f"{split}.txt")) as f:
    return [os.path.join(root, "data", "tasks", task_id) for task_id in f.read().split()]


def clip(shown: str, total_chars: int) -> str:
  """The first characters of an output, with a note when the output had more."""
  if len(shown) >= total_chars:
    return shown
  return (f"{shown}\n[output clipped: showing the first {len(shown)} of {total_chars} "
          "characters]")


def describe_task(opened: dict[str, Any]) -> str:
  """The first observation: who the supervisor is and which apps exist."""
  supervisor = opened["supervisor"]
  apps = "\n".join(f"- {name}: {text}" for name, text in sorted(opened["apps"].items()))
  return (f"I am {supervisor.get('first_name')} {supervisor.get('last_name')} "
          f"(email {supervisor.get('email')}, phone {supervisor.get('phone_number')}), "
          "your supervisor. Write Python that calls `apis.<app>.<api>(...)`; "
          "`apis.api_docs.show_api_descriptions(app_name=...)` and "
          "`apis.api_docs.show_api_doc(app_name=..., api_name=...)` document the APIs, "
          "`apis.supervisor.show_account_passwords()` gives my passwords, and "
          "`apis.supervisor.complete_task(answer=...)` ends the task.\nThe apps:\n" + apps)


class AppWorldEnv:
  """One AppWorld episode at a time (implements `memex_jax.envs.base.Env`).

  Attributes:
    config: the env's options.
    task_text: the current task's instruction.
  """

  def __init__(self, config: AppWorldConfig = AppWorldConfig()):
    self.config = config
    self.task_text = ""
    self._worker: server.WorkerProcess | None = None
    self._deadline = 0.0
    self._steps = 0
    self._done = True
    self._won = False
    self._score = 0.0
    self._last_command: str | None = None
    self._last_changed = False

  @property
  def worker_pid(self) -> int | None:
    """Process id of the AppWorld worker (None before the first reset or after a failure)."""
    return self._worker.process.pid if self._worker is not None else None

  def reset(self, task: str) -> tuple[str, str]:
    """Opens the task world `task` (a task folder); returns (instruction, first observation).

    Raises:
      server.WorkerError: the worker could not start or could not open the task.
    """
    root, task_id = split_task(task)
    if not os.path.isfile(os.path.join(task, "specs.json")):
      raise ValueError(f"{task} has no specs.json")
    self._done, self._won, self._score = True, False, 0.0
    if self._worker is not None and (self._worker.root != root or not self._worker.alive):
      self.close()
    if self._worker is None:
      self._worker = server.WorkerProcess(root, self.config.start_timeout_s, self.config.python)
    try:
      opened = self._worker.call("open", self.config.start_timeout_s, task_id=task_id,
                                 timeout_seconds=self.config.call_timeout_s,
                                 official=self.config.official)
    except server.WorkerError:
      self.close()
      raise
    self.task_text = opened["instruction"]
    self._deadline = time.monotonic() + self.config.episode_timeout_s
    self._steps = 0
    self._done = False
    self._last_command, self._last_changed = None, False
    return self.task_text, describe_task(opened)

  def step(self, command: str) -> tuple[str, bool, bool, dict[str, Any]]:
    """Executes `command` (Python) in the task world; returns (output, done, won, info).

    info: changed_state, writes (the state-changing API calls made), steps, and once done the
    score (fraction of checks passed) and checks; on a failure, failed and reason.
    """
    if not self.task_text:
      raise RuntimeError("AppWorldEnv.step called before reset")
    self._last_command, self._last_changed = command, False
    if self._done:
      return EPISODE_OVER, True, self._won, self._info()
    self._steps += 1
    left_s = self._deadline - time.monotonic()
    if left_s <= 0:  # the worker is sound: it serves the next episode
      return self._fail(f"episode time limit of {self.config.episode_timeout_s:g} s reached",
                        keep_worker=True)
    timeout_s = min(self.config.call_timeout_s + self.config.call_margin_s, left_s)
    try:
      reply = self._worker.call("execute", timeout_s, code=command,
                                max_chars=self.config.max_observation_chars)
    except server.WorkerError as e:
      return self._fail(str(e))
    self._last_changed = bool(reply["changed_state"])
    writes = list(reply["writes"])
    if reply["completed"] or self._steps >= self.config.max_steps:
      try:
        checks = self._worker.call("evaluate", self.config.start_timeout_s)["checks"]
      except server.WorkerError as e:
        return self._fail(str(e))
      self._done = True
      self._score = sum(c["passed"] for c in checks) / max(len(checks), 1)
      self._won = bool(checks) and all(c["passed"] for c in checks)
      info = self._info(writes=writes, checks=checks)
    else:
      info = self._info(writes=writes)
    observation = clip(reply["output"], reply["output_chars"])
    return observation, self._done, self._won, info

  def changes_state(self, command: str) -> bool:
    """Whether the most recent `step(command)` changed the world's database."""
    if command != self._last_command:
      raise ValueError("changes_state answers for the most recent step only")
    return self._last_changed

  def close(self) -> None:
    if self._worker is not None:
      self._worker.close()
      self._worker = None

  def _fail(self, reason: str,
            keep_worker: bool = False) -> tuple[str, bool, bool, dict[str, Any]]:
    if not keep_worker:
      self.close()
    self._done, self._won, self._score = True, False, 0.0
    info = self._info(failed=True, reason=reason)
    return f"The environment failed: {reason}", True, False, info

  def _info(self, **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"changed_state": self._last_changed, "steps": self._steps,
                            "writes": [], "score": self._score}
    info.update(extra)
    return info
