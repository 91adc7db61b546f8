"""Multi-host start-up: join the JAX distributed runtime when the launcher asks for it.

A multi-host launcher (one process per host) sets three environment variables on every host:
  JAX_COORDINATOR_ADDRESS  host:port of process 0's coordinator service, e.g. '10.0.0.2:1234'
  JAX_NUM_PROCESSES        how many processes take part
  JAX_PROCESS_ID           this process's index in [0, JAX_NUM_PROCESSES)
Without JAX_COORDINATOR_ADDRESS the run is single-host and nothing happens. Call this before
anything touches `jax.devices()`.
"""

from __future__ import annotations

import os
from typing import Mapping

import jax

COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"
NUM_PROCESSES = "JAX_NUM_PROCESSES"
PROCESS_ID = "JAX_PROCESS_ID"


def _int_var(env: Mapping[str, str], name: str) -> int:
  value = env.get(name)
  if value is None:
    raise ValueError(f"{COORDINATOR_ADDRESS} is set but {name} is not; set both "
                     f"{NUM_PROCESSES} and {PROCESS_ID} for a multi-host run")
  try:
    return int(value)
  except ValueError:
    raise ValueError(f"{name}={value!r} is not an integer") from None


def maybe_initialize(environ: Mapping[str, str] | None = None) -> bool:
  """Calls `jax.distributed.initialize` if the multi-host variables are set.

  Args:
    environ: the environment to read (default `os.environ`).

  Returns:
    True if this process is (now) part of a multi-process runtime, False for a single host.

  Raises:
    ValueError: (one line) the variables are incomplete or inconsistent.
  """
  env = os.environ if environ is None else environ
  address = env.get(COORDINATOR_ADDRESS)
  if not address:
    return False
  num_processes = _int_var(env, NUM_PROCESSES)
  process_id = _int_var(env, PROCESS_ID)
  if num_processes < 1 or not 0 <= process_id < num_processes:
    raise ValueError(f"{PROCESS_ID}={process_id} is not in [0, {NUM_PROCESSES}={num_processes})")
  if not jax.distributed.is_initialized():
    jax.distributed.initialize(coordinator_address=address, num_processes=num_processes,
                               process_id=process_id)
  return True
