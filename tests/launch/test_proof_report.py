"""The proof run's report reads the RL metrics and both evaluations."""

import json

from launch import proof_report
from memex_jax.runs import log as run_log


def test_report_lists_iterations_and_before_after(tmp_path):
  log = run_log.RunLog(tmp_path / "rl", tensorboard=False)
  for step, reward in ((1, -1.04), (2, -0.5)):
    log.write(step, {"reward": reward, "success": 0.25 * step, "num_compress": 1.0, "num_read": 2.0,
                     "peak_working": 2100.0, "groups_kept": 3})
  for name, success in (("eval_before", 0.1), ("eval_after", 0.4)):
    (tmp_path / name).mkdir()
    (tmp_path / name / "evaluation.json").write_text(json.dumps({"results": {"valid_seen/memex": {
        "success": success, "success_se": 0.05, "num_compress": 3.0, "num_read": 4.0,
        "peak_working": 2000.0}}}))
  text = proof_report.report(tmp_path)
  assert "        2         -0.500          0.500" in text
  assert "eval_before valid_seen/memex       success 0.100 ± 0.050" in text
  assert "eval_after  valid_seen/memex       success 0.400 ± 0.050" in text
