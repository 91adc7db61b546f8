"""ALFWorld on its real engine (TextWorld-PDDL + fast-downward), with Memex's "harder" options.

The engine stack is ALFWorld's own: PddlEnv -> AlfredDemangler -> AlfredInfos (-> AlfredExpert).
It plays our generated games and the official ones alike. One engine per process: fast-downward
is a process-global C library, so run several envs through `make_pool`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Any

from alfworld.agents.environment import alfred_tw_env
import textworld
from textworld.envs import PddlEnv

from memex_jax.envs import pool as pool_lib
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld import goal_conditions
from memex_jax.envs.alfworld import grammar_cache
from memex_jax.envs.alfworld import translation

LOOK = "look"
LOOK_UNAVAILABLE = "look is no longer available: it can be used once per episode."
EPISODE_OVER = "The episode is over. Reset the environment to start a new one."
_MID_ROOM = "You are in the middle of a room."
LISTING = "Looking quickly around you, you see"  # how the engine lists a room's receptacles
_LISTING = re.compile(re.escape(LISTING) + r" (.*)$", re.DOTALL)
_TASK_PREFIX = "Your task is to: "


@dataclasses.dataclass(frozen=True)
class AlfWorldConfig:
  """Options of the ALFWorld wrapper (defaults: plain ALFWorld).

  Attributes:
    hide_admissible_commands: leave the valid commands out of observations and `info`.
    hide_initial_observation: strip the room listing from the first observation; the first
      `look` returns it (the engine's own `look` lists nothing once mid-room).
    look_limit: how many times `look` may run per episode (None: unlimited).
    summary_token_budget: tokens a CompressExperience summary is truncated to (None: no limit).
      The env does not use it; the memory layer reads it from here.
    max_steps: the episode ends, lost, after this many steps.
    expert: None, 'handcoded' or 'planner': the engine's expert fills `info['expert_plan']`.
  """

  hide_admissible_commands: bool = False
  hide_initial_observation: bool = False
  look_limit: int | None = None
  summary_token_budget: int | None = None
  max_steps: int = 50
  expert: str | None = None

  def __post_init__(self):
    if self.expert not in (None, "handcoded", "planner"):
      raise ValueError(f"AlfWorldConfig.expert must be None, 'handcoded' or 'planner', "
                       f"got {self.expert!r}")
    if self.max_steps < 1:
      raise ValueError(f"AlfWorldConfig.max_steps must be positive, got {self.max_steps}")


def memex_harder(**overrides: Any) -> AlfWorldConfig:
  """The Memex paper's harder ALFWorld: hidden commands and listing, one look, 300-token summary."""
  fields = dict(hide_admissible_commands=True, hide_initial_observation=True, look_limit=1,
                summary_token_budget=300)
  fields.update(overrides)
  return AlfWorldConfig(**fields)


def make_pool(num_workers: int, harder: bool = True,
              step_timeout_s: float = 60.0) -> pool_lib.EnvPool:
  """One engine per worker process, Memex's harder variant or plain ALFWorld."""
  config = memex_harder() if harder else AlfWorldConfig()
  factory = functools.partial(AlfWorldEnv, config)  # picklable for spawn
  return pool_lib.EnvPool(factory, num_workers, step_timeout_s=step_timeout_s)


def normalize_command(command: str) -> str:
  """Lower-cases and collapses whitespace: the engine matches commands exactly."""
  return " ".join(str(command).lower().split())


class AlfWorldEnv:
  """One ALFWorld episode at a time (implements `memex_jax.envs.base.Env`).

  Attributes:
    config: the wrapper's options.
    task_text: the current episode's goal sentence.
    summary_token_budget: `config.summary_token_budget`, for the memory layer.
  """

  def __init__(self, config: AlfWorldConfig = AlfWorldConfig()):
    self.config = config
    translation.install()
    grammar_cache.install()
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    engine = alfred_tw_env.AlfredInfos(alfred_tw_env.AlfredDemangler(PddlEnv(infos),
                                                                      shuffle=False))
    if config.expert:
      engine = alfred_tw_env.AlfredExpert(engine, expert_type=config.expert)
    self._engine = engine
    self._loaded: str | None = None
    self._goal: goal_conditions.GoalConditions | None = None
    self._entity_types: dict[str, str] = {}
    self._score = 0.0  # goal_conditions_met() of the current facts
    self._state = None
    self._facts: frozenset = frozenset()
    self._room_items = ""
    self.task_text = ""
    self._steps = 0
    self._looks = 0
    self._done = True
    self._won = False
    self._last_command: str | None = None
    self._last_changed = False

  @property
  def summary_token_budget(self) -> int | None:
    return self.config.summary_token_budget

  def reset(self, task: str) -> tuple[str, str]:
    """Starts `task` (a game folder or game.tw-pddl); returns (task_text, first_observation)."""
    path = games.game_file(task)
    self._state = None
    try:
      if path != self._loaded:
        self._loaded = None
        self._engine.load(path)
        with open(path) as f:
          self._goal = goal_conditions.GoalConditions(
              goal_conditions.parse_goal(json.load(f)["pddl_problem"]))
        self._loaded = path
      state = self._engine.reset()
      room, task_line = [p.strip() for p in state.feedback.split("\n\n")[1:3]]
    except Exception as e:  # The engine's parser/translator errors have many types.
      raise ValueError(f"ALFWorld engine could not start {path}: {type(e).__name__}: {e}") from e
    self._state = state
    self._facts = frozenset(state["_facts"])
    self._entity_types = {a.name: a.type for fact in self._facts for a in fact.arguments}
    self.task_text = task_line.removeprefix(_TASK_PREFIX).rstrip(".")
    listing = _LISTING.search(room)
    self._room_items = listing.group(1).rstrip(".") if listing else "nothing"
    self._steps = self._looks = 0
    self._done = self._won = False
    self._score = self.goal_conditions_met()
    self._last_command, self._last_changed = None, False
    first = _MID_ROOM if self.config.hide_initial_observation else room
    return self.task_text, self._with_commands(first)

  def step(self, command: str) -> tuple[str, bool, bool, dict[str, Any]]:
    """Runs one command; returns (observation, done, won, info). Never raises for bad commands."""
    if self._state is None:
      raise RuntimeError("AlfWorldEnv.step called before reset")
    command = normalize_command(command)
    self._last_command, self._last_changed = command, False
    if self._done:
      return EPISODE_OVER, True, self._won, self._info()
    self._steps += 1
    if command == LOOK and self.config.look_limit is not None:
      if self._looks >= self.config.look_limit:
        return self._finish(self._with_commands(LOOK_UNAVAILABLE))
      self._looks += 1
    try:
      self._state, _, _ = self._engine.step(command)
    except Exception as e:  # An engine failure ends the episode as lost, with the reason.
      self._done = True
      info = self._info()
      info["error"] = f"{type(e).__name__}: {e}"
      return f"The game engine failed on {command!r}.", True, False, info
    facts = frozenset(self._state["_facts"])
    self._last_changed = facts != self._facts
    self._facts = facts
    self._won = bool(self._state["won"])
    if self._last_changed:  # the goal search costs milliseconds: only when the facts moved
      self._score = self.goal_conditions_met()
    observation = self._state.feedback.strip()
    if command == LOOK and self.config.hide_initial_observation:
      observation = self._revealed_room(observation)
    return self._finish(self._with_commands(observation))

  @property
  def expert_plan(self) -> list[str]:
    """The engine expert's next commands in the current state ([] without `config.expert`)."""
    if not self.config.expert or self._state is None:
      return []
    return list(self._state.get("extra.expert_plan") or [])

  def changes_state(self, command: str) -> bool:
    """Whether the most recent `step(command)` changed the engine's facts."""
    if normalize_command(command) != self._last_command:
      raise ValueError(f"changes_state answers for the most recent step only "
                       f"({self._last_command!r}), not {command!r}")
    return self._last_changed

  def _finish(self, observation: str) -> tuple[str, bool, bool, dict[str, Any]]:
    self._done = self._won or self._steps >= self.config.max_steps
    return observation, self._done, self._won, self._info()

  def _revealed_room(self, observation: str) -> str:
    if observation.startswith(_MID_ROOM):
      return f"{_MID_ROOM} {LISTING} {self._room_items}."
    return f"{observation} Looking around the room, you see {self._room_items}."

  def _with_commands(self, observation: str) -> str:
    if self.config.hide_admissible_commands:
      return observation
    return observation + "\n\nAdmissible commands: " + ", ".join(self._admissible()) + "."

  def _admissible(self) -> list[str]:
    return list(self._state["admissible_commands"])

  def goal_conditions_met(self) -> float:
    """The share of the goal's conditions that hold now (1 once won): the partial credit."""
    if self._won:
      return 1.0
    facts = [(fact.name, *(a.name for a in fact.arguments)) for fact in self._facts]
    return self._goal.share_met(facts, self._entity_types)

  def _info(self) -> dict[str, Any]:
    info: dict[str, Any] = {"changed_state": self._last_changed, "steps": self._steps,
                            "score": self._score}
    if not self.config.hide_admissible_commands:
      info["admissible_commands"] = self._admissible()
    if self.config.expert:
      info["expert_plan"] = self.expert_plan
    return info
