"""memex_jax: long-horizon LLM agents with indexed experience memory, in JAX."""

__version__ = "0.1.0"
