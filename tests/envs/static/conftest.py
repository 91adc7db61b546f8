"""The BIG-bench task files, or a skip that says why they cannot be had on this machine."""

import pytest

from memex_jax.envs.static import bigbench_sdist


@pytest.fixture(scope="session")
def bigbench_files():
  """Fetches the BIG-bench task files once (or finds them cached).

  The package registry these machines reach stopped serving the bigbench==1.0.0 sdist on
  2026-12-04 (its simple index lists 0.0.1 only and the 1.0.0 release page answers 403). On a
  machine without the cached files the tests that read them are skipped with the download's
  error, not passed; the rest of the static suites' tests do not need them.
  """
  try:
    bigbench_sdist.bigbench_task_json("object_counting")
  except RuntimeError as error:
    pytest.skip(f"BIG-bench task files unavailable: {str(error).splitlines()[0]}")
