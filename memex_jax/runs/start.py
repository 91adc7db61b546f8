"""What every entry point does first: quiet library logs, join the other hosts, build the mesh."""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable

from memex_jax import parallel
from memex_jax.runs.config_sections import ConfigError


def quiet_library_logs() -> None:
  """Keeps orbax's INFO lines (through absl; 111 for a one-step SFT run) and jax's backend probe
  ("Unable to initialize backend 'tpu'", off TPU) out of a run's own progress output; warnings
  still show."""
  for logger in ("absl", "jax"):
    logging.getLogger(logger).setLevel(logging.WARNING)


def start_run(mesh: Any, rows: int | None = None) -> Any:
  """Returns the device mesh of `config.mesh`, library logs quieted.

  Joins the other hosts when the multi-host variables are set. An impossible mesh, or `rows`
  (config.batch.rows) that do not split over it, ends the run with one line.
  """
  quiet_library_logs()
  parallel.maybe_initialize()
  try:
    result = parallel.make_mesh(parallel.MeshConfig(mesh.data, mesh.fsdp, mesh.tensor))
    if rows is not None:
      parallel.check_batch_size(rows, result, name="config.batch.rows")
  except ValueError as e:
    raise SystemExit(f"config error: {e}") from None
  return result


def exits_on_config_error(main: Callable[[Any], None]) -> Callable[[Any], None]:
  """An entry point's `main` that ends with one 'config error: ...' line on a ConfigError."""

  @functools.wraps(main)
  def run(argv: Any) -> None:
    try:
      main(argv)
    except ConfigError as e:
      raise SystemExit(f"config error: {e}") from None

  return run
