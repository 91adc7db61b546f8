"""Checkpoints of a training run: the train state (orbax) plus host-side state (JSON).

One step directory holds two items: 'state', the train state pytree (params, optimizer state,
step, rng) saved with orbax's sharded array format, and 'host', a JSON dict of what lives on the
host, such as the next episode index and the sampler's rng key, so that a resumed run replays
the same episodes. Saves are asynchronous and atomic (a step appears only once complete), so a
run killed at any moment resumes from the last complete step. A step that cannot be restored
(corrupt file, shape or dtype mismatch) is reported in one warning and moved to
`<directory>/rejected/`, so the resumed run can save that step number again; nothing is ever
deleted here except by `max_to_keep`. The tracebacks that orbax's abandoned reads of a corrupt
step would print are counted instead (`is_abandoned_read`).
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import json
import logging
import os
import sys
import time
from typing import Any, Mapping

import jax
import numpy as np
import orbax.checkpoint as ocp

from memex_jax.parallel.rules import path_name

_LOG = logging.getLogger(__name__)
STATE_ITEM = "state"
HOST_ITEM = "host"


@dataclasses.dataclass(frozen=True)
class Restored:
  """A restored checkpoint.

  Attributes:
    step: the checkpoint's step.
    state: the train state, placed on the target's shardings.
    host: the JSON dict saved with it.
    rejected: (step, reason) of each later checkpoint that could not be used, newest first.
  """

  step: int
  state: Any
  host: dict[str, Any]
  rejected: tuple[tuple[int, str], ...] = ()


def key_to_json(key: jax.Array) -> list[int]:
  """A raw uint32 PRNG key (e.g. `jax.random.PRNGKey(0)`) as a JSON list."""
  key = np.asarray(jax.device_get(key))
  if key.dtype != np.uint32:
    raise ValueError(f"key_to_json expects a raw uint32 PRNG key, got dtype {key.dtype}")
  return key.tolist()


def key_from_json(values: list[int]) -> jax.Array:
  """The raw uint32 PRNG key that `key_to_json` wrote."""
  return jax.numpy.asarray(np.asarray(values, np.uint32))


def abstract_like(tree: Any) -> Any:
  """ShapeDtypeStructs (with shardings) of a tree of arrays; ShapeDtypeStructs pass through."""

  def one(x):
    if isinstance(x, jax.ShapeDtypeStruct):
      return x
    return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None))

  return jax.tree.map(one, tree)


def _flat_by_path(tree: Any) -> dict[str, Any]:
  """Leaves keyed by 'a/b/0' paths, the same for a train state and orbax's metadata tree."""
  leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
  return {path_name(path): leaf for path, leaf in leaves}


def _mismatch(saved: Any, target: Any) -> str | None:
  """Why the saved arrays cannot fill `target` (tree, shape or dtype), or None if they can."""
  saved, target = _flat_by_path(saved), _flat_by_path(target)
  if saved.keys() != target.keys():
    missing = sorted(target.keys() - saved.keys())[:3]
    extra = sorted(saved.keys() - target.keys())[:3]
    return f"tree structure differs (missing {missing}, unexpected {extra})"
  for path, want in target.items():
    got = saved[path]
    if tuple(got.shape) != tuple(want.shape) or np.dtype(got.dtype) != np.dtype(want.dtype):
      return (f"{path}: saved {np.dtype(got.dtype).name}{list(got.shape)}, expected "
              f"{np.dtype(want.dtype).name}{list(want.shape)}")
  return None


def is_abandoned_read(unraisable: Any) -> bool:
  """Whether an unraisable-exception report comes from a failed restore's other shard reads.

  When one shard read of a restore fails, orbax closes its event loop with the step's other
  reads still pending. As they finish, tensorstore's threads report "Event loop is closed", and
  each read's coroutine, once collected, reports the exception orbax raises when it is closed.
  """
  exc, source = unraisable.exc_value, unraisable.object
  if isinstance(exc, RuntimeError) and "Event loop is closed" in str(exc):
    return True
  return inspect.iscoroutine(source) and "orbax" in source.cr_code.co_filename


class _AbandonedReads:
  """While open, counts the reports of abandoned reads (`is_abandoned_read`) instead of printing.

  A failed restore would otherwise follow its one warning with dozens of tracebacks on stderr, at
  whatever moment the garbage collector reaches the reads. After `failed()` (called once the
  restore's exception is handled, so its traceback no longer keeps the reads alive) closing
  collects them, until `quiet_rounds` collections in a row add no report or `most_seconds` have
  passed (a full collection takes ~1 s in a large process). Every other report goes to the hook
  that was in place.
  """

  def __init__(self, quiet_rounds: int = 3, most_seconds: float = 5.0):
    self.count = 0
    self._quiet_rounds, self._most_seconds = quiet_rounds, most_seconds
    self._failed = False
    self._previous = sys.unraisablehook

  def failed(self) -> None:
    self._failed = True

  def _hook(self, unraisable: Any) -> None:
    if is_abandoned_read(unraisable):
      self.count += 1
    else:
      self._previous(unraisable)

  def __enter__(self) -> "_AbandonedReads":
    self._previous = sys.unraisablehook
    sys.unraisablehook = self._hook
    return self

  def __exit__(self, *exc: Any) -> None:
    try:
      quiet, deadline = 0, time.monotonic() + self._most_seconds
      while self._failed and quiet < self._quiet_rounds and time.monotonic() < deadline:
        before = self.count
        gc.collect()
        time.sleep(0.02)
        quiet = quiet + 1 if self.count == before else 0
    finally:
      sys.unraisablehook = self._previous


class Checkpointer:
  """Asynchronous, keep-N checkpoints of (train state, host JSON) under one directory.

  Attributes:
    directory: absolute path of the checkpoint root; each step is a sub-directory.
  """

  def __init__(self, directory: str | os.PathLike[str], max_to_keep: int | None = 3,
               async_save: bool = True):
    """Opens (creating if needed) `directory`; `max_to_keep=None` keeps every step."""
    self.directory = os.path.abspath(os.fspath(directory))
    options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                           enable_async_checkpointing=async_save)
    # Handlers are declared up front so that a fresh process can read metadata before restoring.
    self._manager = ocp.CheckpointManager(
        self.directory, options=options,
        item_handlers={STATE_ITEM: ocp.StandardCheckpointHandler(),
                       HOST_ITEM: ocp.JsonCheckpointHandler()})

  def save(self, step: int, state: Any, host: Mapping[str, Any] | None = None) -> bool:
    """Starts saving `state` and `host` as `step`; returns False if orbax skips the step.

    The state's arrays are copied before this returns, so the caller may donate them to the
    next step right away; the files are written in the background (see `wait`).
    """
    host = dict(host or {})
    try:
      json.dumps(host)
    except TypeError as e:
      raise ValueError(
          f"checkpoint step {step}: host state is not JSON-serialisable: {e}") from None
    return self._manager.save(step, args=ocp.args.Composite(
        **{STATE_ITEM: ocp.args.StandardSave(state), HOST_ITEM: ocp.args.JsonSave(host)}))

  def wait(self) -> None:
    """Blocks until every started save is on disk."""
    self._manager.wait_until_finished()

  def steps(self) -> list[int]:
    """The complete checkpoints' steps, oldest first."""
    return sorted(self._manager.all_steps())

  def delete(self, step: int) -> None:
    """Removes checkpoint `step` from disk."""
    self._manager.delete(step)

  def restore(self, step: int, target: Any) -> tuple[Any, dict[str, Any]]:
    """(state, host) of `step`, placed like `target`.

    Args:
      step: a step from `steps()`.
      target: the train state's arrays or ShapeDtypeStructs (with shardings) to restore onto.

    Raises:
      ValueError: the saved tree, shapes or dtypes do not match `target`.
      Exception: whatever orbax raises for unreadable files.
    """
    target = abstract_like(target)
    saved = self._manager.item_metadata(step)[STATE_ITEM]
    reason = _mismatch(getattr(saved, "tree", saved), target)
    if reason is not None:
      raise ValueError(reason)
    restored = self._manager.restore(step, args=ocp.args.Composite(
        **{STATE_ITEM: ocp.args.StandardRestore(target), HOST_ITEM: ocp.args.JsonRestore()}))
    return restored[STATE_ITEM], dict(restored[HOST_ITEM] or {})

  def restore_latest(self, target: Any) -> Restored | None:
    """The newest checkpoint that restores onto `target`; None if there is none.

    A checkpoint that fails (unreadable file, tree/shape/dtype mismatch) is logged as a warning
    naming its step and the reason, and the one before it is tried. Failed steps are kept, moved
    to `<directory>/rejected/<step>`: left in place they would make orbax skip the resumed run's
    save of the same step number.
    """
    self.wait()
    rejected = []
    restored = None
    for step in reversed(self.steps()):
      reason = None
      with _AbandonedReads() as abandoned:
        try:
          state, host = self.restore(step, target)
        except Exception as e:  # pylint: disable=broad-except
          reason = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
          abandoned.failed()
      if reason is not None:
        _LOG.warning("checkpoint step %d in %s cannot be restored (%s); trying the previous one",
                     step, self.directory, reason)
        _LOG.debug("step %d: %d reports of orbax's abandoned reads dropped", step, abandoned.count)
        rejected.append((step, reason))
        continue
      restored = Restored(step=step, state=state, host=host, rejected=tuple(rejected))
      break
    for step, _ in rejected:
      self._set_aside(step)
    if rejected:
      self._manager.reload()
    return restored

  def _set_aside(self, step: int) -> None:
    """Moves step `step`'s directory to rejected/ (a fresh name if it was set aside before)."""
    aside = os.path.join(self.directory, "rejected")
    os.makedirs(aside, exist_ok=True)
    target, copy = os.path.join(aside, str(step)), 1
    while os.path.exists(target):
      copy += 1
      target = os.path.join(aside, f"{step}-{copy}")
    os.rename(os.path.join(self.directory, str(step)), target)
    _LOG.warning("checkpoint step %d moved to %s", step, target)

  def close(self) -> None:
    """Waits for pending saves and releases orbax's background resources."""
    self._manager.close()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()
