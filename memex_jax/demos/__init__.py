"""Expert demonstrations in the Memex format: scripted experts driven through the real agent loop.

This package may import `agent` and `envs`; neither imports it.
"""

from memex_jax.demos.alfworld import (OPENING_STEPS, DemonstrationConfig, DemonstrationError,
                                      demonstration_stats, expert_solution, make_demonstration,
                                      make_opening, planner_walkthrough, read_walkthrough)
from memex_jax.demos.search_prior import SearchPrior

__all__ = ["DemonstrationConfig", "DemonstrationError", "demonstration_stats", "expert_solution",
           "make_demonstration", "make_opening", "OPENING_STEPS", "planner_walkthrough",
           "read_walkthrough", "SearchPrior"]
