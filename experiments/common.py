"""Pieces the entry points share: the policy model, its sharded train state and resume, ALFWorld
games and pool, agent settings, and per-iteration rollout statistics."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
import pathlib
from typing import Any, Callable, Sequence

import jax
import numpy as np

from memex_jax import checkpoint as checkpoint_lib
from memex_jax import parallel
from memex_jax import rl
from memex_jax.agent import AgentConfig
from memex_jax.agent.trajectory import EpisodeMetrics
from memex_jax.envs.alfworld import demonstrations
from memex_jax.envs.alfworld import env as alfworld_env
from memex_jax.envs.alfworld import games as games_lib
from memex_jax.envs.alfworld import generate as generate_lib
from memex_jax.envs import pool as pool_lib
from memex_jax.models import gguf_io
from memex_jax.models import quant
from memex_jax.models.config import ModelConfig
from memex_jax.models.pretrained import smollm2_gguf_path
from memex_jax.tokenizers import Tokenizer

GAMES_CACHE = (pathlib.Path(os.environ.get("MEMEX_JAX_CACHE", "~/.cache/memex_jax")).expanduser()
               / "alfworld")
# Every numeric field of the agent's per-episode metrics (finish_reason is a label).
ROLLOUT_KEYS = tuple(field.name for field in dataclasses.fields(EpisodeMetrics)
                     if field.name != "finish_reason")


def load_model(model: Any) -> tuple[ModelConfig, dict, Tokenizer]:
  """(config, float params, tokenizer) from `model.gguf` ('' = packaged SmolLM2)."""
  path = model.gguf or str(smollm2_gguf_path())
  cfg, params = gguf_io.load_gguf(path)
  tokenizer = Tokenizer.from_gguf(path)
  tokenizer.check_matches(cfg.vocab_size, path)
  cfg = cfg.replace(dtype=model.dtype, remat=bool(model.remat),
                    quant="int4_qat" if model.int4 else "none")
  return cfg, params, tokenizer


@dataclasses.dataclass(frozen=True)
class ShardedTraining:
  """A train state placed on the mesh, its jitted step, and the shardings both were built for.

  Attributes:
    state: the rl.TrainState, params and optimizer state sharded, the rest replicated.
    step_fn: the sharded `(state, batch) -> (state, metrics)`; it donates the state it is given.
    params_shardings: the params' NamedShardings.
    batch_shardings: the NamedShardings of a [rows, seq_len] PackedBatch.
  """

  state: rl.TrainState
  step_fn: Callable[..., Any]
  params_shardings: Any
  batch_shardings: Any


def sharded_training(model_cfg: ModelConfig, params: Any, optimizer: Any,
                     step: Callable[..., Any], mesh: Any, seed: int, batch: Any,
                     init_checkpoint: str = "") -> ShardedTraining:
  """The train state of `params` on `mesh` and `step` jitted for it.

  Args:
    model_cfg: the policy's config (decides the params' shardings).
    params: the policy's host params.
    optimizer: the optax transformation `step` applies.
    step: the un-jitted `(state, batch) -> (state, metrics)`, e.g.
      `functools.partial(rl.sft_step, model_cfg, optimizer)`.
    mesh: the device mesh.
    seed: seeds the state's rng.
    batch: `config.batch` (rows, seq_len) of the batches `step` takes.
    init_checkpoint: a params export to start from instead of `params` ('' = `params`).
  """
  p_shard = parallel.param_shardings(model_cfg, mesh)
  params = jax.device_put(params, p_shard)
  if init_checkpoint:
    params = import_params(init_checkpoint, params)
  state = rl.TrainState.create(params, optimizer, jax.random.PRNGKey(seed))
  s_shard = parallel.train_state_shardings(state, mesh, p_shard, optimizer)
  b_shard = parallel.batch_shardings(rl.empty_batch(batch.rows, batch.seq_len), mesh)
  return ShardedTraining(state=jax.device_put(state, s_shard),
                         step_fn=parallel.shard_step(step, mesh, s_shard, b_shard),
                         params_shardings=p_shard, batch_shardings=b_shard)


def restore_latest(ckpt: checkpoint_lib.Checkpointer,
                   target: Any) -> checkpoint_lib.Restored | None:
  """The newest checkpoint that restores onto `target` (None: none), naming each one rejected."""
  restored = ckpt.restore_latest(target)
  if restored is not None:
    for step, reason in restored.rejected:
      print(f"checkpoint {step} rejected ({reason}); resumed from {restored.step}")
  return restored


def alfworld_games(env: Any, split: str | None = None, num: int | None = None) -> list[str]:
  """Game folders of a split: $ALFWORLD_DATA's or `env.games_dir`'s if set, else generated."""
  split = split or env.split
  num = env.num_games if num is None else num
  official = os.environ.get("ALFWORLD_DATA")
  if env.games_dir or (official and _has_split(official, split)):
    found = games_lib.find_games(env.games_dir or official, split)
    if not found:
      raise FileNotFoundError(f"no ALFWorld games for split {split!r} under "
                              f"{env.games_dir or official}")
    return found[:num]
  root = GAMES_CACHE / f"seed{env.game_seed}_{split}_{num}"
  records = generate_lib.generate_split(str(root), split, num, env.game_seed,
                                        workers=env.workers)
  return [str(root / r["path"]) for r in records]


def _has_split(root: str, split: str) -> bool:
  try:
    games_lib.split_root(root, split)
  except FileNotFoundError:
    return False
  return True


def env_config(env: Any) -> alfworld_env.AlfWorldConfig:
  return alfworld_env.memex_harder() if env.harder else alfworld_env.AlfWorldConfig()


def make_pool(env: Any, num_workers: int) -> pool_lib.EnvPool:
  """One ALFWorld engine per worker process (fast-downward is process-global)."""
  factory = functools.partial(alfworld_env.AlfWorldEnv, env_config(env))  # picklable for spawn
  return pool_lib.EnvPool(factory, num_workers, step_timeout_s=env.step_timeout_s)


def agent_config(agent: Any, mode: str | None = None) -> AgentConfig:
  """The ALFWorld agent settings, with the demonstrations' system prompt (SFT and RL must match)."""
  return demonstrations.smollm2_agent_config(
      mode=mode or agent.mode, max_steps=agent.max_steps, context_window=agent.context_window,
      threshold=agent.threshold, max_turn_tokens=agent.max_turn_tokens,
      summary_token_budget=agent.summary_token_budget)


def sampler_view(model_cfg: ModelConfig, params: Any) -> tuple[ModelConfig, Any]:
  """The rollout policy's (config, params): int4 serving weights under QAT, else the float ones."""
  if model_cfg.quant == "int4_qat":
    return model_cfg.replace(quant="int4_serve"), quant.to_int4_serving(params)
  return model_cfg, params


def summarize(trajectories: Sequence[Any]) -> dict[str, float]:
  """Mean and standard error of each rollout metric, the total penalty and the episode count."""
  rows = [t.metrics.as_dict() for t in trajectories]
  out: dict[str, float] = {"episodes": len(rows)}
  for key in ROLLOUT_KEYS:
    values = np.asarray([float(r[key]) for r in rows])
    out[key] = float(values.mean()) if len(values) else math.nan
    out[f"{key}_se"] = (float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1
                        else 0.0)
  out["penalty"] = -(out["p_context"] + out["p_redundancy"] + out["p_format"])
  reasons = [r["finish_reason"] for r in rows]
  for reason in sorted(set(reasons)):
    out[f"finish_{reason}"] = reasons.count(reason) / len(reasons)
  return out


def write_trajectories(path: str | os.PathLike[str], trajectories: Sequence[Any]) -> None:
  """One JSON line per trajectory: its conversation, memory store and metrics (for audit)."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  with path.open("w") as f:
    for t in trajectories:
      f.write(json.dumps({
          "trajectory_id": t.trajectory_id, "group_id": t.group_id, "task": t.task_text,
          "metrics": t.metrics.as_dict(), "memory": t.memory, "error": t.error,
          "segments": [[{"role": m.role, "content": m.content} for m in s.messages]
                       for s in t.segments]}) + "\n")


def export_params(workdir: str, step: int, params: Any) -> str:
  """Saves the policy's params alone under <workdir>/params (what RL and evaluation start from).

  An export already there at this step or a later one is replaced: orbax would skip the save,
  and `import_params`, which takes the newest, would then read params this run did not end with.
  """
  directory = os.path.join(workdir, "params")
  with checkpoint_lib.Checkpointer(directory, max_to_keep=1, async_save=False) as ckpt:
    for stale in [s for s in ckpt.steps() if s >= step]:
      ckpt.delete(stale)
    if not ckpt.save(step, params, {"step": step}):
      raise RuntimeError(f"orbax skipped the params export of step {step} under {directory}")
  return directory


def import_params(directory: str, target: Any) -> Any:
  """The params of the newest usable export in `directory`, placed like `target`."""
  with checkpoint_lib.Checkpointer(directory, max_to_keep=None) as ckpt:
    restored = ckpt.restore_latest(target)
  if restored is None:
    raise FileNotFoundError(f"no restorable params export under {directory} "
                            f"(pass a <workdir>/params folder written by memex_sft or memex_grpo)")
  for step, reason in restored.rejected:
    print(f"params export {step} in {directory} rejected: {reason}")
  print(f"params from {directory} (step {restored.step})")
  return restored.state


def start_run(mesh: Any, rows: int | None = None) -> Any:
  """What every entry point does first; returns the device mesh of `config.mesh`.

  Joins the other hosts when the multi-host variables are set, and keeps orbax's INFO lines
  (through absl; 111 for a one-step SFT run) and jax's backend probe ("Unable to initialize
  backend 'tpu'", off TPU) out of the run's own progress output; warnings still show. An
  impossible mesh, or `rows` (config.batch.rows) that do not split over it, ends the run with one
  line.
  """
  for logger in ("absl", "jax"):
    logging.getLogger(logger).setLevel(logging.WARNING)
  parallel.maybe_initialize()
  try:
    result = parallel.make_mesh(parallel.MeshConfig(mesh.data, mesh.fsdp, mesh.tensor))
    if rows is not None:
      parallel.check_batch_size(rows, result, name="config.batch.rows")
  except ValueError as e:
    raise SystemExit(f"config error: {e}") from None
  return result
