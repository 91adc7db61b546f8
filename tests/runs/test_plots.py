"""The run plots are written as real PNG files."""

from memex_jax.runs import plots
from memex_jax.runs import log as run_log

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_training_and_evaluation_plots(tmp_path):
  log = run_log.RunLog(tmp_path, tensorboard=False)
  for step in range(1, 4):
    log.write(step, {"success": step / 4, "penalty": -0.1 * step, "peak_working": 900 + step,
                     "mean_working": 500.0, "num_compress": 2.0, "num_read": step})
  path = plots.plot_training(tmp_path / run_log.METRICS_FILE, tmp_path / "plots")
  assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 10_000
  rows = [{"label": "memex", "success": 0.6, "success_se": 0.05, "peak_working": 2100,
           "num_compress": 3, "num_read": 5},
          {"label": "summary_only", "success": 0.3, "success_se": 0.04, "peak_working": 2000,
           "num_compress": 3, "num_read": 0}]
  eval_path = plots.plot_evaluation(rows, tmp_path / "plots")
  assert eval_path.read_bytes()[:8] == PNG_MAGIC


def test_custom_training_panels_and_bars(tmp_path):
  log = run_log.RunLog(tmp_path, tensorboard=False)
  for step in range(1, 4):
    log.write(step, {"reward": 0.1 * step, "s_with": 0.5, "R": [10, 20]})
  path = plots.plot_training(tmp_path / run_log.METRICS_FILE, tmp_path / "plots",
                             (("copilot reward", ("reward",)), ("score", ("s_with",))))
  assert path.read_bytes()[:8] == PNG_MAGIC
  bars = plots.plot_bars([{"label": "no_memory", "average": 0.4, "average_se": 0.05},
                          {"label": "expharness", "average": 0.5, "average_se": 0.04}],
                         "average", "average_se", "held-out score", tmp_path / "plots", "eval.png")
  assert bars.read_bytes()[:8] == PNG_MAGIC and bars.name == "eval.png"
