"""Environments behind the Env seam (`base.Env`): ALFWorld, static task suites, a toy vault."""

from memex_jax.envs.base import Env
