"""Expert demonstrations on generated AppWorld tasks, in the Memex format.

The expert looks up the documentation of every API the task's reference solution calls,
archives it with CompressExperience (API docs are the evidence worth keeping verbatim), reads it
back with ReadExperience before it writes code, then runs the reference solution cell by cell
through the `execute` tool. It plays through the real agent loop, so the trajectory is exactly
what a policy trained on it would see.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Sequence

from memex_jax.agent import (AgentConfig, ChatRenderer, EpisodeSpec, ScriptedPolicy, Trajectory,
                             run_episodes, tool_response_body)
from memex_jax.agent.presets import smollm2_appworld
from memex_jax.agent.scripted import ScriptedTurn
from memex_jax.demos import memory_stats
from memex_jax.demos.errors import DemonstrationError
from memex_jax.envs.appworld import generate
from memex_jax.envs.appworld.env import AppWorldConfig, AppWorldEnv
from memex_jax.memory import COMPRESS, READ

DOCS_INDEX = "api_docs"
_API_CALL = re.compile(r"apis\.(\w+)\.(\w+)\b")  # called, or passed on (to a pager)
_SKIPPED_APPS = ("supervisor", "api_docs")  # described in the first observation
# Every `name.name` pair, overlapping: `app.api` in the docs and in `apis.app.api` alike.
_API_NAME = re.compile(r"(?=\b(\w+)\.(\w+)\b)")


@dataclasses.dataclass(frozen=True)
class DemonstrationConfig:
  """How AppWorld demonstrations are played.

  Attributes:
    agent: the agent loop's settings (the SmolLM2 AppWorld preset by default).
    env: the AppWorld env's options.
  """

  agent: AgentConfig = dataclasses.field(default_factory=smollm2_appworld)
  env: AppWorldConfig = dataclasses.field(default_factory=AppWorldConfig)


def solution_apis(solution: Sequence[str]) -> list[tuple[str, str]]:
  """(app, api) of every app API the code calls or passes on, in first-use order, each app's
  login first."""
  seen: dict[tuple[str, str], None] = {}
  for cell in solution:
    for app, api in _API_CALL.findall(cell):
      if app not in _SKIPPED_APPS:
        seen.setdefault((app, "login"), None)
        seen.setdefault((app, api), None)
  return list(seen)


def _call(reasoning: str, name: str, **arguments: Any) -> str:
  return (f"{reasoning}\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n"
          "</tool_call>")


def docs_command(apis: Sequence[tuple[str, str]]) -> str:
  """Code printing a compact doc (description and parameters) of each API."""
  return ("for app, api in " + repr(list(apis)) + ":\n"
          "    doc = apis.api_docs.show_api_doc(app_name=app, api_name=api)\n"
          "    params = ', '.join(p['name'] + ('*' if p['required'] else '') "
          "for p in doc['parameters'])\n"
          "    print(f\"{app}.{api}({params}): {doc['description']}\")")


def expert_turns(solution: Sequence[str]) -> list[ScriptedTurn]:
  """The expert's turns for a task with this reference solution."""
  apis = solution_apis(solution)

  def archive_docs(context: str) -> str:
    docs = tool_response_body(context) or ""
    return _call("The API docs are what I will need again: I archive them verbatim and keep a "
                 "short plan.", COMPRESS,
                 summary=f"Looked up the docs of {len(apis)} APIs ({DOCS_INDEX}). Plan: log in, "
                         "read what the task needs, make the changes, complete the task.",
                 db_blocks=[{"index": DOCS_INDEX, "description": "API signatures (* required) "
                             "and descriptions", "db_content": docs}])

  turns: list[ScriptedTurn] = [
      _call("I first look up the APIs I need.", "execute", command=docs_command(apis)),
      archive_docs,
      _call("Before writing code I read the archived API docs back.", READ, index=DOCS_INDEX)]
  turns += [_call(f"Step {i + 1} of the solution.", "execute", command=cell)
            for i, cell in enumerate(solution)]
  return turns


def make_demonstration(task: str, renderer: ChatRenderer, config: AgentConfig | None = None,
                       env: AppWorldEnv | None = None) -> Trajectory:
  """Plays a generated task's expert demonstration through the agent loop.

  Raises:
    DemonstrationError: the episode did not end won.
  """
  config = config or smollm2_appworld()
  own_env = env is None
  env = env or AppWorldEnv()
  try:
    policy = ScriptedPolicy(renderer, [expert_turns(generate.read_json(task, "solution"))])
    [trajectory] = run_episodes(policy, [EpisodeSpec(env, task)], renderer, config)
  finally:
    if own_env:
      env.close()
  if not trajectory.metrics.success:
    raise DemonstrationError(f"{task}: the demonstration ended with "
                             f"{trajectory.metrics.finish_reason} {trajectory.error}".rstrip())
  return trajectory


def demonstrator(config: DemonstrationConfig,
                 renderer: ChatRenderer) -> tuple[AppWorldEnv, Callable[[str, int], Trajectory]]:
  """(this process's env, `demonstrate(task, seed)` on it): what `demos.dataset` plays. The
  expert is deterministic, so the seed changes nothing."""
  env = AppWorldEnv(config.env)
  return env, lambda task, seed: make_demonstration(task, renderer, config.agent, env)


def task_type(task: str) -> str:
  return generate.read_json(task, "meta")["task_type"]


def demonstration_stats(trajectory: Trajectory) -> dict[str, Any]:
  """Memory use (`memory_stats`, ids being the `app.api` names); the expert never searches."""
  stats, _ = memory_stats.memory_stats(
      trajectory, lambda text: {".".join(m) for m in _API_NAME.findall(text)})
  return {**stats, "empty_searches": 0, "refused": 0}
