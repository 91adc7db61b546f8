"""The GGUF -> HF folder CLI, run as a subprocess, read back by transformers."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers

from memex_jax.models import convert
from memex_jax.models import hf_io
from memex_jax.models.pretrained import smollm2_gguf_path


def run_cli(*args: str) -> subprocess.CompletedProcess:
  env = dict(os.environ, JAX_PLATFORMS="cpu", HF_HUB_OFFLINE="1")
  return subprocess.run([sys.executable, "-m", "memex_jax.models.convert", *args],
                        capture_output=True, text=True, env=env, timeout=600, check=False)


def test_missing_file_fails_with_its_name(tmp_path):
  result = run_cli("--gguf", str(tmp_path / "absent.gguf"), "--out", str(tmp_path / "out"))
  assert result.returncode == 1
  assert f"error: GGUF file {tmp_path / 'absent.gguf'} not found" in result.stderr
  assert not (tmp_path / "out").exists()


def test_non_gguf_file_fails_with_its_name(tmp_path, capsys):
  text = tmp_path / "notes.gguf"
  text.write_text("not a model, just text that is long enough to be read")
  assert convert.main(["--gguf", str(text), "--out", str(tmp_path / "out")]) == 1
  assert f"error: {text}: not a GGUF file" in capsys.readouterr().err
  assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_smollm2_folder_loads_in_transformers(tmp_path, smollm2, smollm2_tokenizer):
  path, out = smollm2_gguf_path(), tmp_path / "smollm2"
  result = run_cli("--gguf", str(path), "--out", str(out))
  assert result.returncode == 0, result.stderr
  for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json"):
    assert (out / name).is_file(), name

  model = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
  tokenizer = transformers.AutoTokenizer.from_pretrained(out)
  cfg, params = smollm2

  assert hf_io.read_config(out) == cfg
  assert model.generation_config.eos_token_id == smollm2_tokenizer.eos_id
  expected = hf_io.tensors_from_params(cfg, params)
  for name, tensor in model.state_dict().items():
    if name != "lm_head.weight":  # tied: the same storage as the embedding
      np.testing.assert_array_equal(tensor.numpy(), expected[name], err_msg=name)
  text = "<|im_start|>user\nConvert 3 km to miles, please.<|im_end|>\n"
  assert tokenizer(text)["input_ids"] == smollm2_tokenizer.encode(text)
