"""Atomic save/load of the experience graph, format version and embedding-model checks."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from memex_jax.harness import graph as graph_lib
from memex_jax.harness import persistence
from memex_jax.harness import retrieval
from memex_jax.harness.experience import ExperienceGraph
from memex_jax.harness.experience import ExperienceUnit

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _graph(num_units: int, seed: int) -> ExperienceGraph:
  config = graph_lib.GraphConfig(capacity=24, embed_dim=8, grace_insertions=2)
  graph = ExperienceGraph(config, MODEL)
  vectors = np.random.default_rng(seed).normal(size=(num_units, 8))
  for i, vector in enumerate(vectors):
    graph.insert(ExperienceUnit(f"unit {i} \u2713", ("skill", "lesson")[i % 2], f"t{i}"), vector)
  graph.record_feedback([0, 3], 1.5)
  return graph


def test_round_trip_keeps_arrays_units_counters_and_retrieval(tmp_path):
  graph = _graph(30, seed=0)  # over capacity: some slots were evicted and reused
  path = tmp_path / "graph.npz"
  persistence.save(path, graph)
  loaded = persistence.load(path, MODEL)
  assert loaded.config == graph.config and loaded.units == graph.units
  for got, want in zip(jax.tree.leaves(loaded.state), jax.tree.leaves(graph.state)):
    np.testing.assert_array_equal(got, want)
  queries = np.random.default_rng(1).normal(size=(2, 8)).astype(np.float32)
  controls = np.array([30, 70])
  np.testing.assert_array_equal(
      retrieval.retrieve(loaded.state, queries, controls, controls).indices,
      retrieval.retrieve(graph.state, queries, controls, controls).indices)
  assert [name for name in os.listdir(tmp_path)] == ["graph.npz"]


def test_refuses_another_embedding_model_and_another_version(tmp_path):
  path = tmp_path / "graph.npz"
  persistence.save(path, _graph(5, seed=2))
  with pytest.raises(persistence.EmbeddingModelMismatchError,
                     match="all-MiniLM-L6-v2.*facebook/contriever"):
    persistence.load(path, "facebook/contriever")
  with np.load(path) as data:
    arrays = dict(data)
  metadata = json.loads(arrays["metadata"].tobytes())
  metadata["format_version"] = 99
  arrays["metadata"] = np.frombuffer(json.dumps(metadata).encode(), np.uint8)
  np.savez(path, **arrays)
  with pytest.raises(persistence.GraphFileError, match="format version 99"):
    persistence.load(path, MODEL)


def test_corrupt_or_missing_files_raise_graph_file_error(tmp_path):
  path = tmp_path / "graph.npz"
  persistence.save(path, _graph(5, seed=3))
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])
  with pytest.raises(persistence.GraphFileError, match="graph.npz"):
    persistence.load(path, MODEL)
  with pytest.raises(persistence.GraphFileError, match="missing.npz"):
    persistence.load(tmp_path / "missing.npz", MODEL)


def test_write_failing_midway_leaves_previous_graph_and_no_temp_file(tmp_path, monkeypatch):
  path = tmp_path / "graph.npz"
  before = _graph(5, seed=4)
  persistence.save(path, before)

  def write_half_then_fail(file, **arrays):
    file.write(b"PK\x03\x04 partial archive")
    raise OSError("disk full")

  monkeypatch.setattr(np, "savez", write_half_then_fail)
  with pytest.raises(OSError, match="disk full"):
    persistence.save(path, _graph(12, seed=5))
  monkeypatch.undo()
  assert persistence.load(path, MODEL).units == before.units
  assert os.listdir(tmp_path) == ["graph.npz"]


def test_process_killed_mid_save_leaves_previous_graph(tmp_path):
  path = tmp_path / "graph.npz"
  before = _graph(5, seed=6)
  persistence.save(path, before)
  # A real process dies by SIGKILL after writing the new file's bytes, before they are synced
  # and renamed: the moment a power cut or OOM kill would hurt a non-atomic save.
  script = textwrap.dedent(f"""
      import os, signal, sys
      sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
      from test_persistence import _graph
      from memex_jax.harness import persistence
      os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
      persistence.save({str(path)!r}, _graph(12, seed=7))
  """)
  done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120,
                        env={**os.environ, "JAX_PLATFORMS": "cpu"}, check=False)
  assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
  assert persistence.load(path, MODEL).units == before.units
  assert any(name.endswith(".tmp") for name in os.listdir(tmp_path))  # the dead save's leftover
