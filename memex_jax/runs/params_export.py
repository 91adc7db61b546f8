"""A run's policy params alone, under `<workdir>/params`: what RL, evaluation and serving load."""

from __future__ import annotations

import os
from typing import Any

from memex_jax.runs.checkpoint import Checkpointer

EXPORT_DIR = "params"


def export_params(workdir: str, step: int, params: Any) -> str:
  """Saves `params` under <workdir>/params and returns that folder.

  An export already there at this step or a later one is replaced: orbax would skip the save,
  and `import_params`, which takes the newest, would then read params this run did not end with.
  """
  directory = os.path.join(workdir, EXPORT_DIR)
  with Checkpointer(directory, max_to_keep=1, async_save=False) as ckpt:
    for stale in [s for s in ckpt.steps() if s >= step]:
      ckpt.delete(stale)
    if not ckpt.save(step, params, {"step": step}):
      raise RuntimeError(f"orbax skipped the params export of step {step} under {directory}")
  return directory


def import_params(directory: str, target: Any) -> Any:
  """The params of the newest usable export in `directory`, placed like `target`."""
  with Checkpointer(directory, max_to_keep=None) as ckpt:
    restored = ckpt.restore_latest(target)
  if restored is None:
    raise FileNotFoundError(f"no restorable params export under {directory} "
                            f"(pass a <workdir>/{EXPORT_DIR} folder written by memex_sft or "
                            "memex_grpo)")
  for step, reason in restored.rejected:
    print(f"params export {step} in {directory} rejected: {reason}")
  print(f"params from {directory} (step {restored.step})")
  return restored.state
