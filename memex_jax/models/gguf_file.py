"""The header of a GGUF file (v2/v3): metadata key/values and the tensor table, no tensor data.

Both GGUF readers build on this: `tokenizers` takes the vocabulary from the metadata, and
`models.gguf_io` maps the tensor bytes that the table points at. It depends on the standard
library only, so reading a tokenizer imports neither numpy nor the `gguf` package (~1.5 s).
Parsing here takes well under a second for a 49k-token vocabulary, where `gguf.GGUFReader`
builds a memmap view per string and takes ~10 s.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import pathlib
import struct
from typing import Any

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"

# Metadata value types of the GGUF spec: fixed-size scalars (as struct codes), string and array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")  # string lengths


class GGUFError(ValueError):
  """A file that is not a readable GGUF file; the message names the file and the field at fault."""


@dataclasses.dataclass(frozen=True)
class TensorInfo:
  """One entry of the tensor table.

  Attributes:
    name: GGUF name ('blk.0.attn_q.weight').
    shape: GGUF order, innermost dimension first ([in, out] for a Linear weight).
    ggml_type: storage type id (`gguf.GGMLQuantizationType` value: 0 F32, 3 Q4_1, ...).
    offset: start of the tensor's bytes, relative to `GGUFHeader.data_start`.
  """

  name: str
  shape: tuple[int, ...]
  ggml_type: int
  offset: int


@dataclasses.dataclass(frozen=True)
class GGUFHeader:
  """Everything a GGUF file says before its tensor data.

  Attributes:
    path: the file.
    version: GGUF format version (2 or 3).
    metadata: key -> value (int, float, bool, str or a list of them), in file order.
    tensors: name -> TensorInfo, in file order.
    data_start: absolute byte offset of the (aligned) tensor data section.
    file_size: size of the file in bytes.
  """

  path: pathlib.Path
  version: int
  metadata: dict[str, Any]
  tensors: dict[str, TensorInfo]
  data_start: int
  file_size: int


class _Reader:
  """Little-endian reads from a memory-mapped file; errors name the file and `where` it read."""

  def __init__(self, path: pathlib.Path, blob: mmap.mmap):
    self.path, self.blob, self.pos, self.where = path, blob, 0, "the file header"

  def error(self, problem: str) -> GGUFError:
    return GGUFError(f"{self.path}: truncated or corrupt GGUF header, in {self.where}: {problem}")

  def take(self, code: str, count: int = 1) -> tuple[Any, ...]:
    size = struct.calcsize(f"<{code}") * count
    if self.pos + size > len(self.blob):
      raise self.error(f"{size} bytes at byte {self.pos} run past the end of the file "
                       f"({len(self.blob)} bytes)")
    values = struct.unpack_from(f"<{count}{code}", self.blob, self.pos)
    self.pos += size
    return values

  def string(self) -> str:
    # The hot path (one call per vocabulary entry and merge), so it avoids `take`'s overhead.
    start = self.pos
    end = start + _U64.size
    if end <= len(self.blob):
      end += _U64.unpack_from(self.blob, start)[0]
    if end > len(self.blob):
      raise self.error(f"the string at byte {start} runs past the end of the file "
                       f"({len(self.blob)} bytes)")
    self.pos = end
    try:
      return self.blob[start + _U64.size:end].decode("utf-8")
    except UnicodeDecodeError as e:
      raise self.error(f"the string at byte {start} is not UTF-8 ({e})") from e

  def value(self, kind: int) -> Any:
    if kind == _STRING:
      return self.string()
    if kind == _ARRAY:
      item_kind, count = self.take("IQ")
      if item_kind in _SCALARS:
        return list(self.take(_SCALARS[item_kind], count))
      return [self.value(item_kind) for _ in range(count)]
    if kind not in _SCALARS:
      raise self.error(f"unknown GGUF value type {kind} before byte {self.pos}")
    return self.take(_SCALARS[kind])[0]


def read_header(path: str | os.PathLike) -> GGUFHeader:
  """Reads the metadata and tensor table of a GGUF v2/v3 file, no tensor data.

  Raises:
    FileNotFoundError: `path` is not a file.
    GGUFError: the file is not GGUF, or its header is truncated or corrupt (the message names
      the file and the metadata field or tensor being read).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"GGUF file {path} not found")
  with open(path, "rb") as f:
    if f.read(len(MAGIC)) != MAGIC:  # also refuses empty files, which cannot be mapped
      raise GGUFError(f"{path}: not a GGUF file (it does not start with the magic bytes {MAGIC!r})")
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as blob:
      reader = _Reader(path, blob)
      reader.pos = len(MAGIC)
      (version,) = reader.take("I")
      if version not in VERSIONS:
        raise GGUFError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
      num_tensors, num_fields = reader.take("QQ")
      metadata = {}
      for index in range(num_fields):
        reader.where = f"metadata key #{index}"
        key = reader.string()
        if key in metadata:
          raise GGUFError(f"{path}: metadata field {key!r} appears twice")
        reader.where = f"metadata field {key!r}"
        (kind,) = reader.take("I")
        metadata[key] = reader.value(kind)
      tensors = {}
      for index in range(num_tensors):
        reader.where = f"tensor #{index} of the tensor table"
        name = reader.string()
        if name in tensors:
          raise GGUFError(f"{path}: tensor {name!r} appears twice in the tensor table")
        reader.where = f"tensor {name!r} of the tensor table"
        (num_dims,) = reader.take("I")
        shape = reader.take("Q", num_dims)
        ggml_type, offset = reader.take("IQ")
        tensors[name] = TensorInfo(name, shape, ggml_type, offset)
      header_end, file_size = reader.pos, len(blob)
  alignment = metadata.get(ALIGNMENT_KEY, DEFAULT_ALIGNMENT)
  if type(alignment) is not int or alignment <= 0:  # pylint: disable=unidiomatic-typecheck  # bool
    raise GGUFError(f"{path}: metadata field {ALIGNMENT_KEY!r} must be a positive integer, "
                    f"got {alignment!r}")
  data_start = -(-header_end // alignment) * alignment
  return GGUFHeader(path, version, metadata, tensors, data_start, file_size)
