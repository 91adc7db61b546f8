"""launch/device_checks.sh: a SCALE it does not know is refused before anything is installed."""

import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).parents[2]


def test_unknown_scale_is_refused_before_the_wheels_install(tmp_path):
  site = tmp_path / "site"
  env = {**os.environ, "SCALE": "tpu", "SITE": str(site), "OUT": str(tmp_path / "out")}
  done = subprocess.run(["bash", str(REPO / "launch" / "device_checks.sh")], env=env,
                        capture_output=True, text=True, timeout=60)
  assert done.returncode == 2
  assert "SCALE must be gpu or cpu, got tpu" in done.stderr
  assert not site.exists() and not (tmp_path / "out").exists()
