"""Environment families the entry points can run on: a name -> its tasks, pool and instructions.

`config.env.name` selects one. A family's heavy modules (its engine, its generator) are imported
only when it is selected, so running AppWorld never imports ALFWorld's engine and vice versa.
Every family takes the same arguments, so one config section fits them all:
- `tasks(dir, split, num, seed, workers)`: task folders of a split, generated into the cache when
  `dir` is '';
- `make_pool(num_workers, harder, step_timeout_s)`: an `EnvPool` of the family's env.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from memex_jax.envs import pool as pool_lib


@dataclasses.dataclass(frozen=True)
class Family:
  """One environment family, by the modules that implement it.

  Attributes:
    name: what `config.env.name` says.
    package: the family's package under `memex_jax.envs`.
    splits: its splits, training split first.
    tasks_fn: the name of the tasks function in `<package>.generate`.
  """

  name: str
  package: str
  splits: tuple[str, ...]
  tasks_fn: str

  def _module(self, module: str) -> Any:
    return importlib.import_module(f"memex_jax.envs.{self.package}.{module}")

  @property
  def tasks(self) -> Callable[..., list[str]]:
    """`tasks(dir, split, num, seed, workers)` -> task folders."""
    return getattr(self._module("generate"), self.tasks_fn)

  @property
  def make_pool(self) -> Callable[..., pool_lib.EnvPool]:
    """`make_pool(num_workers, harder, step_timeout_s)` -> an EnvPool of the family's env."""
    return self._module("env").make_pool

  @property
  def instructions(self) -> str:
    """What the agent is told about the environment (its system prompt's env part)."""
    return self._module("instructions").INSTRUCTIONS

  def split_size(self, split: str) -> int:
    """The official size of a split: how many tasks evaluating the whole split plays."""
    sizes = self._module("generate").OFFICIAL_SIZES
    if split not in sizes:
      raise ValueError(f"{self.name} has no split {split!r}; its splits are {self.splits}")
    return sizes[split]


FAMILIES = {
    "alfworld": Family("alfworld", "alfworld", ("train", "valid_seen", "valid_unseen"),
                       "games_for"),
    "appworld": Family("appworld", "appworld", ("train", "test_normal", "test_challenge"),
                       "tasks_for"),
}


def get(name: str) -> Family:
  """The family called `name`.

  Raises:
    ValueError: no such family (the message lists the known ones).
  """
  if name not in FAMILIES:
    raise ValueError(f"unknown environment family {name!r}; known: {sorted(FAMILIES)}")
  return FAMILIES[name]


def select(name: str = "alfworld", **pool_options: Any) -> tuple[Family, dict[str, Any]]:
  """(the family called `name`, its pool's options): how an entry point reads `config.env`."""
  return get(name), pool_options
