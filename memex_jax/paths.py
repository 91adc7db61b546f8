"""Where memex_jax keeps what it builds once per machine (assembled weights, engines, data)."""

from __future__ import annotations

import os
import pathlib


def cache_root() -> pathlib.Path:
  """`$MEMEX_JAX_CACHE`, else ~/.cache/memex_jax."""
  return pathlib.Path(os.environ.get("MEMEX_JAX_CACHE", "~/.cache/memex_jax")).expanduser()
