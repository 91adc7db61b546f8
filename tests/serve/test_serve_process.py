"""The server as a child process: a server that cannot start says why, with its own output."""

import socket

import pytest

from memex_jax.serve.process import ServerProcess, free_port


def test_free_port_has_no_listener():
  port = free_port()
  with pytest.raises(ConnectionRefusedError):
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_server_that_cannot_start_reports_its_output(tmp_path):
  with pytest.raises(RuntimeError) as error:
    with ServerProcess(["--model", str(tmp_path / "missing.gguf")]):
      pass
  message = str(error.value)
  assert "the server did not come up on http://127.0.0.1:" in message
  assert "cannot load the model: --model" in message and "missing.gguf" in message
