"""Atomic save/load of an ExperienceGraph as one .npz file (arrays + a JSON metadata member).

The file holds the node arrays, the live edges, the counters and a `metadata` member: UTF-8
JSON bytes with the format version, the embedding model's name, the GraphConfig and every
slot's unit. Saving writes a temporary file in the same folder, fsyncs it, then `os.replace`s
it over the target (atomic on POSIX) and fsyncs the folder, so a crash at any point leaves
either the previous file or the new one, never a mix. Loading refuses another format version
and, since similarities between embeddings of different encoders mean nothing, a graph whose
embedding model is not the caller's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import zipfile
from typing import BinaryIO, Callable

import numpy as np

from memex_jax.harness import experience
from memex_jax.harness import graph as graph_lib

FORMAT_VERSION = 1
_ARRAYS = ("embedding", "utility", "count", "alive", "kind", "inserted_at", "senders",
           "receivers", "num_retrievals", "num_insertions", "num_duplicates", "metadata")


class GraphFileError(ValueError):
  """A graph file that cannot be read: missing, corrupt, or of another format version."""


class EmbeddingModelMismatchError(ValueError):
  """The graph's embeddings come from another embedding model than the caller's."""


def save(path: str | os.PathLike[str], graph: experience.ExperienceGraph) -> None:
  """Writes `graph` to `path` atomically (the previous file survives any crash mid-save)."""
  state = graph_lib.to_host(graph.state)
  capacity = graph.config.capacity
  metadata = {
      "format_version": FORMAT_VERSION,
      "embedding_model": graph.embedding_model,
      "graph_config": dataclasses.asdict(graph.config),
      "units": [None if unit is None else dataclasses.asdict(unit) for unit in graph.units],
  }
  senders, receivers = graph_lib.live_edges(state)
  nodes = state.nodes
  arrays = {
      "embedding": nodes.embedding[:capacity], "utility": nodes.utility[:capacity],
      "count": nodes.count[:capacity], "alive": nodes.alive[:capacity],
      "kind": nodes.kind[:capacity], "inserted_at": nodes.inserted_at[:capacity],
      "senders": senders, "receivers": receivers,
      "num_retrievals": state.num_retrievals, "num_insertions": state.num_insertions,
      "num_duplicates": state.num_duplicates,
      "metadata": np.frombuffer(json.dumps(metadata).encode("utf-8"), np.uint8),
  }
  write_atomically(path, lambda f: np.savez(f, **arrays))


def write_atomically(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> None:
  """Calls `write` on a temporary file beside `path`, fsyncs it, renames it over `path` and
  fsyncs the folder: a crash at any point leaves the previous file or the new one, never a mix
  (the graph file, the s_without cache)."""
  path = os.path.abspath(os.fspath(path))
  folder = os.path.dirname(path)
  os.makedirs(folder, exist_ok=True)
  fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=folder)
  try:
    with os.fdopen(fd, "wb") as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(temporary, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temporary)
    raise
  folder_fd = os.open(folder, os.O_RDONLY)
  try:
    os.fsync(folder_fd)  # Makes the rename itself durable.
  finally:
    os.close(folder_fd)


def load(path: str | os.PathLike[str], embedding_model: str) -> experience.ExperienceGraph:
  """Reads a graph saved by `save`.

  Args:
    path: the .npz file.
    embedding_model: the caller's embedding model; the graph must have been built with it.

  Raises:
    GraphFileError: the file is missing, corrupt or of another format version.
    EmbeddingModelMismatchError: the graph was built with another embedding model.
  """
  path = os.fspath(path)
  try:
    with np.load(path, allow_pickle=False) as data:
      missing = [name for name in _ARRAYS if name not in data.files]
      if missing:
        raise GraphFileError(f"{path}: not an experience graph file (missing {missing})")
      arrays = {name: data[name] for name in _ARRAYS}
    metadata = json.loads(arrays.pop("metadata").tobytes().decode("utf-8"))
  except (OSError, zipfile.BadZipFile, ValueError, EOFError) as error:
    if isinstance(error, GraphFileError):
      raise
    raise GraphFileError(f"{path}: cannot read the experience graph: {error}") from error
  if not isinstance(metadata, dict):
    raise GraphFileError(f"{path}: metadata is not a JSON object")
  version = metadata.get("format_version")
  if version != FORMAT_VERSION:
    raise GraphFileError(f"{path}: format version {version!r}, this code reads {FORMAT_VERSION}")
  if metadata.get("embedding_model") != embedding_model:
    raise EmbeddingModelMismatchError(
        f"{path}: the graph was built with embedding model {metadata.get('embedding_model')!r}, "
        f"not {embedding_model!r}; its similarities would be meaningless. Rebuild the graph "
        "with this model or load it with the model it was built with.")
  try:
    config = graph_lib.GraphConfig(**metadata["graph_config"])
    units = [None if unit is None else experience.ExperienceUnit(**unit)
             for unit in metadata["units"]]
    state = graph_lib.state_from_arrays(
        config, arrays["embedding"], arrays["senders"], arrays["receivers"],
        utility=arrays["utility"], count=arrays["count"], alive=arrays["alive"],
        kind=arrays["kind"], inserted_at=arrays["inserted_at"],
        num_retrievals=int(arrays["num_retrievals"]),
        num_insertions=int(arrays["num_insertions"]),
        num_duplicates=int(arrays["num_duplicates"]), normalize=False)
    return experience.ExperienceGraph(config, embedding_model, state=state, units=units)
  except (KeyError, TypeError, ValueError) as error:
    raise GraphFileError(f"{path}: inconsistent experience graph: {error}") from error
