"""maybe_initialize: a no-op on one host, a real 2-process runtime when the variables are set."""

import os
import socket
import subprocess
import sys

import pytest

from memex_jax.parallel import distributed

_CHILD = """
import jax
from memex_jax.parallel import distributed
assert distributed.maybe_initialize()
print("RESULT", jax.process_index(), jax.process_count(), len(jax.devices()), flush=True)
jax.distributed.shutdown()
"""


def test_single_host_is_a_no_op():
  assert distributed.maybe_initialize({}) is False


@pytest.mark.parametrize("env, message", [
    ({"JAX_COORDINATOR_ADDRESS": "localhost:1", "JAX_PROCESS_ID": "0"},
     "JAX_NUM_PROCESSES is not"),
    ({"JAX_COORDINATOR_ADDRESS": "localhost:1", "JAX_NUM_PROCESSES": "two",
      "JAX_PROCESS_ID": "0"}, "JAX_NUM_PROCESSES='two' is not an integer"),
    ({"JAX_COORDINATOR_ADDRESS": "localhost:1", "JAX_NUM_PROCESSES": "2",
      "JAX_PROCESS_ID": "2"}, r"JAX_PROCESS_ID=2 is not in \[0, JAX_NUM_PROCESSES=2\)"),
])
def test_incomplete_variables_are_a_one_line_error(env, message):
  with pytest.raises(ValueError, match=message):
    distributed.maybe_initialize(env)


def test_two_processes_join_one_runtime():
  with socket.socket() as s:
    s.bind(("localhost", 0))
    port = s.getsockname()[1]
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one CPU device per process
  env.update(JAX_PLATFORMS="cpu", JAX_COORDINATOR_ADDRESS=f"localhost:{port}",
             JAX_NUM_PROCESSES="2")
  children = [subprocess.Popen([sys.executable, "-c", _CHILD],
                               env=dict(env, JAX_PROCESS_ID=str(i)), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
              for i in range(2)]
  outputs = [child.communicate(timeout=120)[0] for child in children]
  lines = [line for out in outputs for line in out.splitlines()]
  results = sorted(line for line in lines if line.startswith("RESULT"))
  assert results == ["RESULT 0 2 2", "RESULT 1 2 2"], outputs
