r"""Expert demonstrations with Indexed Experience Memory: the SFT warm start of MemexRL on ALFWorld.

A demonstration is the real agent loop (`run_episodes`) driven by a scripted policy, so its ids,
loss masks and segments are exactly what the loop builds. The policy is `alfworld_expert`'s:
it searches the room as a policy could (likeliest places first under a prior estimated from the
training games), plays the game's expert solution (the walkthrough the game file ships, or
the engine's planner expert's when it ships none), compresses whenever the working context is
over the threshold and reads back the ids it needs.

`demos.dataset` writes many of them as the SFT dataset.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from memex_jax.agent import ChatRenderer, EpisodeSpec, ScriptedPolicy, Trajectory, run_episodes
from memex_jax.demos import memory_stats
from memex_jax.demos.alfworld_config import DemonstrationConfig
from memex_jax.demos.alfworld_expert import Demonstrator
from memex_jax.demos.alfworld_text import (REFUSED, Decision, kind_of, seen_items,
                                           segment_decisions)
from memex_jax.demos.errors import DemonstrationError
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld.env import AlfWorldConfig, AlfWorldEnv
from memex_jax.envs.alfworld.instructions import THING_ID
from memex_jax.memory import TextTokenizer
from memex_jax.rl.sample import trained_runs

__all__ = [
    "DemonstrationConfig", "DemonstrationError", "decision_spans", "demonstration_stats",
    "demonstrator", "expert_solution", "make_demonstration", "make_opening", "OPENING_STEPS",
    "planner_walkthrough", "read_walkthrough", "task_type", "weighted_decisions", "weighted_turns",
]


def read_walkthrough(game: str) -> list[str]:
  """The expert solution a game file ships (ours and the official ones both carry it)."""
  path = games.game_file(game)
  with open(path) as f:
    walkthrough = json.load(f).get("walkthrough")
  if not walkthrough or not all(isinstance(c, str) for c in walkthrough):
    raise DemonstrationError(f"{path} has no 'walkthrough' list of commands")
  return walkthrough


@functools.cache
def _planner_env() -> AlfWorldEnv:
  """This process's engine with ALFWorld's planner expert (built once: engines are costly)."""
  return AlfWorldEnv(AlfWorldConfig(expert="planner"))


def planner_walkthrough(game: str, max_steps: int = 50) -> list[str]:
  """The commands by which the engine's planner expert wins `game`, played in plain ALFWorld.

  Raises:
    DemonstrationError: the planner found no plan or did not win within `max_steps`.
  """
  env = _planner_env()
  try:
    env.reset(game)
  except ValueError as e:
    raise DemonstrationError(f"the planner expert could not start {game}: {e}") from None
  commands: list[str] = []
  for _ in range(max_steps):
    plan = env.expert_plan
    if not plan:
      break
    commands.append(plan[0])
    _, done, won, _ = env.step(plan[0])
    if won:
      return commands
    if done:
      break
  raise DemonstrationError(f"the planner expert did not win {game} in {len(commands)} steps")


def expert_solution(game: str) -> list[str]:
  """The walkthrough the game file ships, else the planner expert's (official games without one)."""
  try:
    return read_walkthrough(game)
  except DemonstrationError:
    return planner_walkthrough(game)


# An opening is a demonstration's first turns: the look, then the turn that writes the task plan
# (and goes to the first place of the search).
OPENING_STEPS = 2


def _play(game_path: str, renderer: ChatRenderer, config: DemonstrationConfig, seed: int,
          env: AlfWorldEnv | None, max_steps: int) -> tuple[Trajectory, Demonstrator]:
  """The expert's episode of at most `max_steps` turns and the expert that played it."""
  demonstrator = Demonstrator(expert_solution(game_path), config, random.Random(seed),
                              renderer.tokenizer)
  policy = ScriptedPolicy(renderer, [[demonstrator] * max_steps])
  agent = dataclasses.replace(config.agent, max_steps=max_steps)
  try:
    [trajectory] = run_episodes(policy, [EpisodeSpec(env or AlfWorldEnv(config.env),
                                                     game_path)], renderer, agent)
  except DemonstrationError as e:
    raise DemonstrationError(f"{game_path}: {e}") from None
  return trajectory, demonstrator


def _weighted(trajectory: Trajectory, demonstrator: Demonstrator, config: DemonstrationConfig,
              tokenizer: TextTokenizer) -> Trajectory:
  """The trajectory's loss masks with the config's turn and decision weights (slips out)."""
  weights = {turn: config.found_weight for turn in demonstrator.found}
  weights |= {turn: max(config.plan_weight, weights.get(turn, 1)) for turn in demonstrator.planned}
  weighted = weighted_decisions(trajectory, config.decision_weight, tokenizer)
  return weighted_turns(weighted, {**weights, **{turn: 0 for turn in demonstrator.slips}})


def make_demonstration(game_path: str, renderer: ChatRenderer,
                       config: DemonstrationConfig = DemonstrationConfig(), seed: int = 0,
                       env: AlfWorldEnv | None = None) -> Trajectory:
  """Plays one game's expert solution (`expert_solution`) with memory through the real agent loop.

  Args:
    game_path: a game folder (or its game.tw-pddl).
    renderer: the ChatML renderer over the policy's tokenizer.
    config: agent and env settings, and the search prior.
    seed: picks the search order among equally likely places and the wording (same seed, same
      demonstration).
    env: an AlfWorldEnv built with `config.env` to reuse (one engine per process).

  Raises:
    DemonstrationError: the solution failed in the engine or did not win.
  """
  trajectory, demonstrator = _play(game_path, renderer, config, seed, env,
                                   config.agent.max_steps)
  if not trajectory.metrics.success:
    raise DemonstrationError(f"{game_path}: the demonstration ended with "
                             f"{trajectory.metrics.finish_reason} {trajectory.error}".rstrip())
  return _weighted(trajectory, demonstrator, config, renderer.tokenizer)


def make_opening(game_path: str, renderer: ChatRenderer, config: DemonstrationConfig,
                 seed: int = 0, env: AlfWorldEnv | None = None) -> Trajectory:
  """The first OPENING_STEPS turns of the game's demonstration (`make_demonstration`'s
  arguments): the look and the turn that writes the task plan, weighted as there.

  Openings teach the plan from more games than whole demonstrations can afford: a plan is
  written once per demonstration, and the twenty-first and twenty-second proof runs' policies
  wrote the expert's plan for 35 and 40 of their own 128 train games.

  Raises:
    ValueError: the config's expert writes no plan (`plan_steps` off).
    DemonstrationError: the opening failed in the engine or wrote no plan.
  """
  if not config.plan_steps:
    raise ValueError("an opening teaches the task plan: it needs plan_steps")
  trajectory, demonstrator = _play(game_path, renderer, config, seed, env, OPENING_STEPS)
  if not demonstrator.planned or trajectory.error:
    raise DemonstrationError(f"{game_path}: the opening wrote no plan {trajectory.error}".rstrip())
  return _weighted(trajectory, demonstrator, config, renderer.tokenizer)


def _turn_runs(roles: Sequence[str], loss_mask: np.ndarray, segment: Any) -> list[np.ndarray]:
  """The positions of each assistant turn's trained tokens in a segment, in order."""
  runs = trained_runs(loss_mask)
  assistant_turns = sum(role == "assistant" for role in roles)
  if len(runs) != assistant_turns:  # Then a run is not a turn: nothing to weigh by number.
    raise DemonstrationError(f"segment {segment}: {len(runs)} trained runs for "
                             f"{assistant_turns} assistant turns")
  return runs


def decision_spans(messages: Sequence[Mapping[str, str]], loss_mask: np.ndarray,
                   tokenizer: TextTokenizer, segment: Any = "") -> list[tuple[Decision, int, int]]:
  """Where each search decision of a rendered segment sits (`alfworld_text.segment_decisions`):
  (decision, position of the restatement's first token, position of the deciding token: the
  first after the sought kind), from the segment's loss mask before any turn is weighed 0."""
  turn_runs = dict(zip([i for i, m in enumerate(messages) if m["role"] == "assistant"],
                       _turn_runs([m["role"] for m in messages], loss_mask, segment)))
  spans = []
  for decision in segment_decisions(messages):
    content = messages[decision.turn]["content"]
    # The space before the place's name joins its first token, so the prefix ends before it.
    before = tokenizer.encode(content[:decision.match.start(1)].rstrip(" "))
    through = tokenizer.encode(content[:decision.decides_at])
    if (tokenizer.encode(content)[:len(through)] != through or
        through[:len(before)] != before):
      raise DemonstrationError(f"segment {segment}: the decision of turn {decision.turn} does "
                               "not start a token")
    run = turn_runs[decision.turn]
    spans.append((decision, int(run[len(before)]), int(run[len(through)])))
  return spans


def weighted_decisions(trajectory: Trajectory, weight: int,
                       tokenizer: TextTokenizer) -> Trajectory:
  """`trajectory` with the loss weight of each search decision's token times `weight`
  (`decision_spans`). Before `weighted_turns`, while every turn is one run of trained tokens: a
  turn's own weight then multiplies its decision's (0 keeps it out)."""
  if weight == 1:
    return trajectory
  segments = []
  for segment in trajectory.segments:
    mask = segment.sample.loss_mask.copy()
    messages = [{"role": m.role, "content": m.content} for m in segment.messages]
    for _, _, decides in decision_spans(messages, mask, tokenizer, segment.sample.index):
      mask[decides] *= weight
    segments.append(dataclasses.replace(
        segment, sample=dataclasses.replace(segment.sample, loss_mask=mask)))
  return dataclasses.replace(trajectory, segments=tuple(segments))


def weighted_turns(trajectory: Trajectory, weights: Mapping[int, int]) -> Trajectory:
  """`trajectory` with the loss masks of the given assistant turns (counted from 0 over the
  episode) times their weights. A turn at weight 0 is out of the loss and stays in the context,
  as what the next turns answer."""
  if all(w == 1 for w in weights.values()):
    return trajectory
  segments, turn = [], 0
  for segment in trajectory.segments:
    mask = segment.sample.loss_mask.copy()
    for run in _turn_runs([m.role for m in segment.messages], mask, segment.sample.index):
      mask[run] *= weights.get(turn, 1)
      turn += 1
    segments.append(dataclasses.replace(
        segment, sample=dataclasses.replace(segment.sample, loss_mask=mask)))
  return dataclasses.replace(trajectory, segments=tuple(segments))


def demonstrator(config: DemonstrationConfig, renderer: ChatRenderer
                 ) -> tuple[AlfWorldEnv, Callable[[str, int, bool], Trajectory]]:
  """(this process's engine, `demonstrate(game, seed, opening)` on it): what `demos.dataset`
  plays; with `opening` only the demonstration's opening (`make_opening`)."""
  env = AlfWorldEnv(config.env)
  def demonstrate(game: str, seed: int, opening: bool = False) -> Trajectory:
    play = make_opening if opening else make_demonstration
    return play(game, renderer, config, seed, env)
  return env, demonstrate


def task_type(game: str) -> str:
  """A game's task type, from its folder (`<type>-<objects>-.../trial_...`)."""
  return os.path.basename(os.path.dirname(os.path.abspath(game))).split("-")[0]


def _ids(text: str) -> set[str]:
  return set(THING_ID.findall(text))


def empty_searches(executed: list[tuple[str, str]]) -> int:
  """Receptacles searched before the first sight of a needed thing that held none.

  Args:
    executed: (command, observation) of every environment action, in order; the kinds needed
      are those the actions take or use.
  """
  needed = {kind_of(THING_ID.findall(c)[0]) for c, _ in executed if c.startswith(("take ", "use "))}
  empty = set()
  for command, observation in executed:
    items = seen_items(observation) if "you see" in observation else None
    if items is None or command.split(" ")[0] not in ("go", "open", "examine"):
      continue
    if any(kind_of(i) in needed for i in items):
      break
    empty.add(command.split(" ", 1)[1].removeprefix("to "))
  return len(empty)


def demonstration_stats(trajectory: Trajectory) -> dict[str, Any]:
  """Memory use (`memory_stats`, ids being the game's objects) and the search: receptacles
  found empty before the first needed thing was seen."""
  stats, executed = memory_stats.memory_stats(trajectory, _ids)
  return {**stats, "empty_searches": empty_searches(executed),
          "refused": sum(o.startswith(REFUSED) for _, o in executed)}
