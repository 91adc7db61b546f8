"""memex_jax.models.gguf_file: headers written by the `gguf` package, read back exactly."""

from __future__ import annotations

import pathlib
import re
import struct

import gguf
import numpy as np
import pytest

from memex_jax.models import gguf_file
from memex_jax.models import pretrained

# One metadata field per GGUF value type (scalars, string, arrays of scalars and of strings).
FIELDS = {
    "memex.u8": (gguf.GGUFWriter.add_uint8, 200),
    "memex.i8": (gguf.GGUFWriter.add_int8, -100),
    "memex.u16": (gguf.GGUFWriter.add_uint16, 60000),
    "memex.i16": (gguf.GGUFWriter.add_int16, -30000),
    "memex.u32": (gguf.GGUFWriter.add_uint32, 4_000_000_000),
    "memex.i32": (gguf.GGUFWriter.add_int32, -2_000_000_000),
    "memex.u64": (gguf.GGUFWriter.add_uint64, 2**63 + 5),
    "memex.i64": (gguf.GGUFWriter.add_int64, -(2**62)),
    "memex.f32": (gguf.GGUFWriter.add_float32, 1e-5),
    "memex.f64": (gguf.GGUFWriter.add_float64, 1e-300),
    "memex.bool": (gguf.GGUFWriter.add_bool, True),
    "memex.text": (gguf.GGUFWriter.add_string, "héllo wörld 🙂"),
    "memex.ints": (gguf.GGUFWriter.add_array, [3, 1, 4, 1, 5]),
    "memex.floats": (gguf.GGUFWriter.add_array, [0.5, -2.25]),
    "memex.words": (gguf.GGUFWriter.add_array, ["<|im_start|>", "Ġthe", "", "世界"]),
}
TENSORS = {
    "w.f32": np.arange(15, dtype=np.float32).reshape(5, 3),
    "w.f16": np.linspace(-1, 1, 7).astype(np.float16),
}
Q8_0 = gguf.GGMLQuantizationType.Q8_0


def write(path: pathlib.Path, alignment: int | None = None) -> pathlib.Path:
  """A GGUF file holding FIELDS, TENSORS and one Q8_0 tensor 'w.q8' of logical shape (2, 64)."""
  writer = gguf.GGUFWriter(str(path), arch="llama")
  if alignment is not None:
    writer.add_custom_alignment(alignment)
  for key, (add, value) in FIELDS.items():
    add(writer, key, value)
  for name, array in TENSORS.items():
    writer.add_tensor(name, array)
  weights = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
  writer.add_tensor("w.q8", gguf.quants.quantize(weights, Q8_0), raw_dtype=Q8_0)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return path


def expected_metadata(alignment: int | None = None) -> dict:
  floats = {"memex.f32": float(np.float32(1e-5)), "memex.floats": [0.5, -2.25]}
  written = {key: floats.get(key, value) for key, (_, value) in FIELDS.items()}
  aligned = {} if alignment is None else {"general.alignment": alignment}
  return {"general.architecture": "llama", **aligned, **written}


@pytest.mark.parametrize("alignment", [None, 64])
def test_reads_what_the_gguf_writer_wrote(tmp_path, alignment):
  path = write(tmp_path / "model.gguf", alignment)
  header = gguf_file.read_header(path)

  assert header.version == 3 and header.path == path
  assert header.metadata == expected_metadata(alignment)
  assert type(header.metadata["memex.bool"]) is bool  # pylint: disable=unidiomatic-typecheck
  assert list(header.tensors) == [*TENSORS, "w.q8"]
  assert header.data_start % (alignment or gguf_file.DEFAULT_ALIGNMENT) == 0
  assert header.file_size == path.stat().st_size
  raw = path.read_bytes()
  for name, array in TENSORS.items():
    info = header.tensors[name]
    assert info.shape == array.shape[::-1]  # GGUF order: innermost dimension first
    assert info.ggml_type == {np.float32: gguf.GGMLQuantizationType.F32,
                              np.float16: gguf.GGMLQuantizationType.F16}[array.dtype.type]
    start = header.data_start + info.offset
    assert raw[start:start + array.nbytes] == array.tobytes()
  q8 = header.tensors["w.q8"]
  assert (q8.shape, q8.ggml_type) == ((64, 2), Q8_0)


def test_smollm2_header_equals_gguf_reader():
  # The reference is slow (~12 s: gguf.GGUFReader maps each of 97k strings), the file is real.
  path = pretrained.smollm2_gguf_path()
  header = gguf_file.read_header(path)
  reference = gguf.GGUFReader(path)

  assert header.metadata == {name: field.contents() for name, field in reference.fields.items()
                             if not name.startswith("GGUF.")}
  assert len(header.metadata["tokenizer.ggml.tokens"]) == 49152
  assert header.data_start == reference.data_offset
  assert [(t.name, t.shape, t.ggml_type, header.data_start + t.offset)
          for t in header.tensors.values()] == [
              (t.name, tuple(int(n) for n in t.shape), int(t.tensor_type), t.data_offset)
              for t in reference.tensors]


def test_missing_empty_and_foreign_files_name_the_file(tmp_path):
  with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nowhere.gguf"))):
    gguf_file.read_header(tmp_path / "nowhere.gguf")
  for name, content in [("empty.gguf", b""), ("text.gguf", b"not a model at all"),
                        ("short.gguf", b"GG")]:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(gguf_file.GGUFError, match=re.escape(f"{path}: not a GGUF file")):
      gguf_file.read_header(path)


def test_unsupported_version_is_refused(tmp_path):
  path = tmp_path / "v4.gguf"
  raw = bytearray(write(tmp_path / "model.gguf").read_bytes())
  raw[4:8] = struct.pack("<I", 4)
  path.write_bytes(raw)
  with pytest.raises(gguf_file.GGUFError,
                     match=re.escape(f"{path}: GGUF version 4 is not supported")):
    gguf_file.read_header(path)


def test_every_truncation_of_the_header_names_file_and_field(tmp_path):
  raw = write(tmp_path / "model.gguf").read_bytes()
  header_end = raw.index(b"w.q8") + len("w.q8") + 4 + 2 * 8 + 4 + 8  # name, dims, type, offset
  cut = tmp_path / "cut.gguf"
  places = set()
  for size in range(4, header_end):
    cut.write_bytes(raw[:size])
    with pytest.raises(gguf_file.GGUFError) as error:
      gguf_file.read_header(cut)
    message = str(error.value)
    assert message.startswith(f"{cut}: truncated or corrupt GGUF header, in "), message
    places.add(message.split(", in ", 1)[1].split(":", 1)[0])
  # Cut inside a field's value names the field; inside the table, the tensor.
  assert {"metadata field 'memex.words'", "tensor 'w.f16' of the tensor table",
          "metadata key #3", "the file header"} <= places
  cut.write_bytes(raw[:header_end])
  assert list(gguf_file.read_header(cut).tensors) == [*TENSORS, "w.q8"]  # no data is read


def patched(tmp_path: pathlib.Path, old: bytes, new: bytes, after: bytes = b"") -> pathlib.Path:
  """The written file with the first `old` after `after` replaced by `new` (same length)."""
  raw = write(tmp_path / "model.gguf").read_bytes()
  at = raw.index(old, raw.index(after))
  path = tmp_path / "patched.gguf"
  path.write_bytes(raw[:at] + new + raw[at + len(old):])
  return path


@pytest.mark.parametrize("old,new,after,pattern", [
    ("héllo".encode(), b"h\xff\xffllo", b"",
     r"metadata field 'memex\.text': the string at byte \d+ is not UTF-8"),
    (struct.pack("<I", 4), struct.pack("<I", 99), b"memex.u32",
     r"metadata field 'memex\.u32': unknown GGUF value type 99"),
    (b"memex.i8", b"memex.u8", b"memex.u8", r"metadata field 'memex\.u8' appears twice"),
    (b"w.f16", b"w.f32", b"w.f32\x02", r"tensor 'w\.f32' appears twice in the tensor table"),
])
def test_corrupt_headers_name_file_and_field(tmp_path, old, new, after, pattern):
  path = patched(tmp_path, old, new, after)
  with pytest.raises(gguf_file.GGUFError, match=re.escape(str(path)) + ".*" + pattern):
    gguf_file.read_header(path)


@pytest.mark.parametrize("alignment", [0, "32"])
def test_bad_alignment_is_refused(tmp_path, alignment):
  path = tmp_path / "aligned.gguf"
  writer = gguf.GGUFWriter(str(path), arch="llama")
  (writer.add_uint32 if isinstance(alignment, int) else writer.add_string)(
      gguf_file.ALIGNMENT_KEY, alignment)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.close()
  with pytest.raises(gguf_file.GGUFError,
                     match=re.escape(f"{path}: metadata field 'general.alignment' "
                                     "must be a positive")):
    gguf_file.read_header(path)
