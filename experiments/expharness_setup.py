"""What the ExpHarness training and evaluation entry points build alike from one config:
the disjoint train/eval task split, the frozen executor (and summarizer), the copilot sampler,
the graph and retrieval configs of an ablation, and the run's file layout."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from memex_jax import harness
from memex_jax.agent.chat import ChatRenderer
from memex_jax import runs
from memex_jax.envs.static import builders
from memex_jax.envs.static import sources
from memex_jax.harness import copilot as copilot_lib
from memex_jax.harness.tasks import HarnessTask, agentic_task, static_task
from memex_jax.models.policy import load_policy
from memex_jax.models.pretrained import SMOLLM2_NAME
from memex_jax.sampling import Sampler, SamplerConfig
from memex_jax.sampling.config import DEFAULT_STOPS


def graph_path(workdir: str, step: int, host: int = 0) -> str:
  """Where `host` saves the graph of checkpoint `step`.

  Every host holds the same graph and saves its own copy, so a host resumes from its own file
  whether the workdir is shared or on each host's disk.
  """
  suffix = f".host{host}" if host else ""
  return os.path.join(workdir, "graph", f"step_{step}{suffix}.npz")


def scores_path(workdir: str) -> str:
  """The s_without cache of a run."""
  return os.path.join(workdir, "s_without.json")


def _suite_records(suite: str, num: int, seed: int) -> list[sources.TaskRecord]:
  if suite == "gsm_symbolic":  # generated offline by reasoning-gym
    return list(sources.gsm_symbolic_records(num, seed))
  source = builders.load_suite(suite)
  # A seeded sample over the whole suite: its stored order groups records (MMLU's first 50 are
  # all moral scenarios), so the first `num` would be one topic.
  picks = np.random.default_rng(seed).choice(len(source), min(num, len(source)), replace=False)
  return [sources.TaskRecord.from_example(source[int(i)]) for i in sorted(picks)]


def _alfworld_tasks(c: Any) -> list[HarnessTask]:
  """ALFWorld games of `config.tasks.alfworld_split`; the copilot and encoder read the game's
  identifier (e.g. pick_and_place_simple-Mug-None-Cabinet-312, as the paper's Table 7)."""
  from memex_jax.envs.alfworld import generate  # pylint: disable=g-import-not-at-top
  games = generate.games_for(c.tasks.alfworld_dir, c.tasks.alfworld_split, c.tasks.per_suite,
                             c.seed)
  out = []
  for game in games:
    parts = os.path.normpath(game).split(os.sep)
    name = next((p for p in reversed(parts) if "-" in p), parts[-1])
    out.append(agentic_task(game, "alfworld", name.replace("_", " "), game,
                            c.tasks.max_tokens))
  return out


def split_tasks(c: Any) -> tuple[list[HarnessTask], list[HarnessTask]]:
  """(train, eval) tasks: per suite, a seeded shuffle; the first eval_per_suite are held out.

  The split depends only on the config's tasks section and seed, so training and evaluation
  (separate processes) agree on it, and no evaluation task is ever trained on.
  """
  if "alfworld" in c.tasks.suites and len(c.tasks.suites) > 1:
    raise ValueError("config.tasks.suites: ALFWorld runs alone (its executor is the agent loop, "
                     "the static suites' a single completion)")
  train, held_out = [], []
  for suite in c.tasks.suites:
    if suite == "alfworld":
      tasks = _alfworld_tasks(c)
    else:
      tasks = [static_task(r, c.tasks.max_tokens)
               for r in _suite_records(suite, c.tasks.per_suite, c.seed)]
    if len(tasks) <= c.tasks.eval_per_suite:
      raise ValueError(f"suite {suite}: {len(tasks)} tasks leave none for training after "
                       f"holding out eval_per_suite={c.tasks.eval_per_suite}")
    order = np.random.default_rng(c.seed).permutation(len(tasks))
    tasks = [tasks[i] for i in order]
    held_out += tasks[:c.tasks.eval_per_suite]
    train += tasks[c.tasks.eval_per_suite:]
  overlap = {t.task_id for t in train} & {t.task_id for t in held_out}
  if overlap:
    raise ValueError(f"train and eval tasks overlap: {sorted(overlap)[:5]}")
  return train, held_out


@dataclasses.dataclass(frozen=True)
class Executor:
  """The frozen executor, the summarizer model, and the key its s_without scores go under."""

  executor: Any
  summarizer_model: Any
  key: str
  sampler: Sampler | None


def build_executor(c: Any) -> Executor:
  """The frozen executor of `config.executor` (it also serves as the summarizer)."""
  if c.executor.kind == "http":
    endpoint = runs.from_section(harness.EndpointConfig, c.endpoint, "config.endpoint")
    remote = harness.HttpExecutor(endpoint)
    return Executor(remote, remote, f"http:{endpoint.base_url}:{endpoint.model}:greedy", None)
  if c.executor.kind != "sampler":
    raise ValueError(f"config.executor.kind={c.executor.kind!r}; expected 'sampler' or 'http'")
  cfg, params, tokenizer = runs.from_section(load_policy, c.executor_model,
                                             "config.executor_model")
  sampler = Sampler(cfg, params, tokenizer, SamplerConfig(
      num_slots=c.executor.num_slots, cache_length=c.executor.cache_length, temperature=0.0,
      prompt_bucket=128, new_tokens_bucket=16))
  local = harness.SamplerExecutor(sampler)
  name = c.executor_model.gguf or SMOLLM2_NAME
  key = f"sampler:{name}:{c.executor_model.dtype}:greedy"
  if tuple(c.tasks.suites) == ("alfworld",):  # whole episodes, standard mode (commands shown)
    from memex_jax.agent import presets  # pylint: disable=g-import-not-at-top
    from memex_jax.envs.alfworld import env as alfworld_env  # pylint: disable=g-import-not-at-top
    agent_cfg = presets.smollm2_alfworld(max_steps=c.tasks.alfworld_max_steps,
                                         context_window=c.executor.cache_length)
    agent = harness.AgentExecutor(sampler, ChatRenderer(tokenizer), agent_cfg,
                                  alfworld_env.AlfWorldEnv, episodes_per_call=c.executor.num_slots)
    # Scored with partial credit (the goal-condition share), so keyed apart from win-only caches.
    return Executor(agent, local, f"agent:{key}:steps{c.tasks.alfworld_max_steps}:goal_share",
                    sampler)
  return Executor(local, local, key, sampler)


def copilot_sampler(c: Any, model_cfg: Any, params: Any, tokenizer: Any, num_slots: int,
                    seed: int) -> Sampler:
  """The copilot's sampler: it stops on </search>, decodes `num_slots` tasks at once."""
  return Sampler(model_cfg, params, tokenizer, SamplerConfig(
      num_slots=num_slots, cache_length=c.copilot_cache_length, temperature=c.copilot.temperature,
      prompt_bucket=128, new_tokens_bucket=8, seed=seed,
      stop_strings=DEFAULT_STOPS + (copilot_lib.STOP,)))


def harness_configs(c: Any, ablation: str, embed_dim: int
                    ) -> tuple[harness.GraphConfig, harness.RetrievalConfig]:
  """The (graph, retrieval) configs of the config's sections under `ablation`."""
  graph_cfg = runs.from_section(harness.GraphConfig, c.graph, "config.graph", embed_dim=embed_dim)
  retrieval_cfg = runs.from_section(harness.RetrievalConfig, c.retrieval, "config.retrieval")
  return harness.ablation_configs(ablation, graph_cfg, retrieval_cfg)
