"""Environments behind the Env seam (`base.Env`): ALFWorld, static task suites, a toy vault, and
the worker pool (`pool`) that runs any of them one engine per process. Knows no agent, no model."""

from memex_jax.envs.base import Env
