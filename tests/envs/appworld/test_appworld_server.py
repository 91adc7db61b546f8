"""The AppWorld worker process behind loopback HTTP: start-up, refusals, death with its owner."""

import pytest

from memex_jax.envs.appworld import server


def test_worker_refuses_bad_calls_and_stays_up(worlds):
  root = worlds["train"][0].rsplit("/data/tasks/", 1)[0]
  worker = server.WorkerProcess(root)
  try:
    assert worker.alive and worker.call("ping", 10) == {"ok": True}
    with pytest.raises(server.WorkerError, match="refused /execute: RuntimeError: no task world"):
      worker.call("execute", 10, code="print(1)")
    with pytest.raises(server.WorkerError, match="unknown route /nowhere"):
      worker.call("nowhere", 10)
    assert worker.alive  # a refusal is not a failure of the worker
  finally:
    worker.close()
  assert not worker.alive
  with pytest.raises(server.WorkerError, match="died during /ping"):
    worker.call("ping", 10)
