"""The proof report reads a proof WORKDIR into one table per split, report.json and the figures."""

import json
import pathlib
import subprocess

from PIL import Image
import pytest

from launch import proof_report
from memex_jax.agent import records
from memex_jax.agent.trajectory import EpisodeMetrics
from memex_jax.runs import log as run_log

FIGURES = ("fig2_rollout_success.png", "fig3_total_penalty.png", "fig4_success_and_context.png",
           "fig5_memory_calls.png", "sft_loss.png")
SPLITS = ("valid_unseen/memex", "valid_seen/memex")


def episode(success: bool, steps: int, peak: int, compress: int, read: int,
            p_context: float = 0.0, malformed: int = 0) -> dict:
  p_format = malformed / steps
  return EpisodeMetrics(
      success=success, score=float(success), steps=steps, peak_working=peak,
      mean_working=0.6 * peak,
      total_tokens=4 * peak, generated_tokens=30 * steps, num_compress=compress, num_read=read,
      num_truncations=0, num_segments=compress + 1, num_redundant=0, num_malformed=malformed,
      num_tool_calls=steps, p_context=p_context, p_redundancy=0.0, p_format=p_format,
      reward=float(success) - p_context - p_format,
      finish_reason="env_done" if success else "max_steps").as_dict()


# Per policy: the episodes of each split (valid_unseen, valid_seen).
EPISODES = {
    "eval_zero_shot": ([episode(False, 30, 3000, 0, 0, 0.2, 6),
                        episode(False, 30, 2900, 0, 0, 0.1, 3)],
                       [episode(False, 30, 3100, 0, 0, 0.3, 9), episode(True, 20, 2500, 0, 0)]),
    "eval_sft": ([episode(True, 12, 1800, 2, 1), episode(False, 30, 2600, 3, 0, 0.1),
                  episode(True, 14, 1900, 2, 2), episode(True, 16, 2000, 1, 1)],
                 [episode(True, 10, 1500, 1, 1), episode(False, 30, 2400, 4, 0, 0.05)]),
    "eval_rl": ([episode(True, 11, 1600, 1, 2), episode(True, 12, 1700, 1, 3),
                 episode(True, 13, 1500, 2, 2), episode(False, 30, 2100, 2, 1)],
                [episode(True, 9, 1400, 1, 2), episode(True, 11, 1450, 1, 2)]),
}
LABELS = {"eval_zero_shot": "zero-shot", "eval_sft": "SFT", "eval_rl": "SFT+RL"}


def write_workdir(work, folders=tuple(EPISODES), rl_iterations=3):
  stages = [("sft", 120.5), ("eval_zero_shot", 40.0), ("eval_sft", 41.5), ("rl", 300.0),
            ("eval_rl", 39.0)][:1 + len(folders) + (rl_iterations > 0)]
  work.mkdir(parents=True)
  (work / "stages.json").write_text(json.dumps(
      {"stages": [{"name": n, "seconds": s} for n, s in stages],
       "command": "SCALE=cpu launch/memex_proof.sh /tmp/proof"}))
  (work / "demos").mkdir(parents=True)  # where memex_proof.sh writes the demonstrations
  (work / "demos" / "summary.json").write_text(json.dumps(
      {"demonstrations": 16, "failed": 1, "share_crossing_threshold": 0.75,
       "share_with_used_read": 0.5, "mean_steps": 21.25, "task_types": {"pick": 16}}))
  sft = run_log.RunLog(work / "sft", tensorboard=False)
  smoothed = None
  for step, loss in enumerate((2.4, 1.9, 1.5, 1.2, 1.1), 1):
    smoothed = loss if smoothed is None else 0.9 * smoothed + 0.1 * loss
    sft.write(step, {"loss": loss, "smoothed_loss": smoothed, "fill": 0.9}, kind="sft")
    if step % 2 == 0:
      sft.write(step, {"heldout_loss": loss + 0.3}, kind="sft_heldout")
  rl = run_log.RunLog(work / "rl", tensorboard=False)
  for it in range(rl_iterations):  # what memex_grpo logs: the summary of the iteration's rollouts
    rollouts = [episode(i < it + 1, 12 + i, 2000 - 100 * it, 2, it, 0.1 / (it + 1))
                for i in range(4)]
    rl.write(it + 1, {**records.summarize(rollouts), "groups_kept": 2})
  summaries = {}
  for folder in folders:
    summaries[folder] = {s: records.summarize(e) for s, e in zip(SPLITS, EPISODES[folder])}
    (work / folder).mkdir()
    (work / folder / "evaluation.json").write_text(json.dumps(
        {"checkpoint": f"{work}/{folder}/params", "results": summaries[folder]}))
  return summaries


def table_rows(text: str) -> dict[str, dict[str, dict[str, str]]]:
  """{split heading: {policy: {column: cell}}} of table.md's evaluation tables."""
  tables, heading, header = {}, None, None
  for line in text.splitlines():
    if line.startswith("## "):
      heading, header = line[3:], None
    elif line.startswith("| ") and heading:
      cells = [c.strip() for c in line.strip("|").split("|")]
      if header is None:
        header = cells
      else:
        tables.setdefault(heading, {})[cells[0]] = dict(zip(header[1:], cells[1:]))
  return tables


def mean_and_se(text: str) -> tuple[float, float]:
  mean, se = text.split("±")
  return float(mean), float(se)


def test_report_tables_equal_the_evaluations(tmp_path, capsys):
  summaries = write_workdir(tmp_path / "work")
  proof_report.main([str(tmp_path / "work"), "--out", str(tmp_path / "out")])
  text = (tmp_path / "out" / "table.md").read_text()
  assert text in capsys.readouterr().out
  tables = table_rows(text)
  unseen = tables["valid_unseen (memex regime, greedy)"]
  assert list(unseen) == ["zero-shot", "SFT", "SFT+RL"]
  # SFT on valid_unseen: successes 1,0,1,1 -> 0.75 ± 0.5/sqrt(4); RL: compress 1,1,2,2 -> 1.5.
  assert unseen["SFT"]["success ± SE"] == "0.750 ± 0.250"
  assert unseen["SFT+RL"]["compress / ep"] == "1.50"
  assert unseen["zero-shot"]["peak working"] == "2950"
  for split in SPLITS:
    rows = tables[f"{split.split('/')[0]} (memex regime, greedy)"]
    for folder, label in LABELS.items():
      s, row = summaries[folder][split], rows[label]
      assert mean_and_se(row["success ± SE"]) == pytest.approx((s["success"], s["success_se"]),
                                                               abs=5e-4)
      assert mean_and_se(row["reward ± SE"]) == pytest.approx((s["reward"], s["reward_se"]),
                                                              abs=5e-4)
      for column, key, tol in (("mean steps", "steps", 0.05), ("peak working", "peak_working", 0.5),
                               ("mean working", "mean_working", 0.5),
                               ("compress / ep", "num_compress", 5e-3),
                               ("read / ep", "num_read", 5e-3), ("p_context", "p_context", 5e-4),
                               ("p_redundancy", "p_redundancy", 5e-4),
                               ("p_format", "p_format", 5e-4), ("episodes", "episodes", 0)):
        assert float(row[column]) == pytest.approx(s[key], abs=tol), (split, label, column)
  stages = tables["Stage times"]
  assert stages["eval_sft"]["seconds"] == "41.5"
  assert stages["**total**"]["seconds"] == "**541.0**"
  assert "demonstrations 16, failed 1, share_crossing_threshold 0.75" in text


def test_report_json_holds_curves_stages_and_summaries(tmp_path):
  summaries = write_workdir(tmp_path / "work")
  proof_report.write_report(tmp_path / "work", tmp_path / "out")
  report = json.loads((tmp_path / "out" / "report.json").read_text())
  assert report["total_seconds"] == pytest.approx(541.0)
  assert [s["name"] for s in report["stages"]] == ["sft", "eval_zero_shot", "eval_sft", "rl",
                                                   "eval_rl"]
  assert report["demonstrations"]["share_with_used_read"] == 0.5
  assert report["evaluations"]["SFT+RL"]["results"] == summaries["eval_rl"]
  assert report["evaluations"]["SFT"]["checkpoint"].endswith("eval_sft/params")
  assert [r["step"] for r in report["rl_curve"]] == [1, 2, 3]
  assert [r["success"] for r in report["rl_curve"]] == [0.25, 0.5, 0.75]
  assert "groups_kept" not in report["rl_curve"][0]
  assert [r["step"] for r in report["sft_curve"]["train"]] == [1, 2, 3, 4, 5]
  assert [r["heldout_loss"] for r in report["sft_curve"]["heldout"]] == pytest.approx([2.2, 1.5])


def check_figures(out):
  for name in FIGURES:
    with Image.open(out / name) as image:
      assert image.format == "PNG", name
      assert image.size[0] > 400 and image.size[1] > 300, (name, image.size)
      assert len(image.getcolors(1 << 16) or range(1 << 16)) > 20, name  # drawn, not blank


def test_every_figure_is_a_png(tmp_path):
  write_workdir(tmp_path / "work")
  proof_report.write_report(tmp_path / "work", tmp_path / "out")
  check_figures(tmp_path / "out")


def test_a_run_cut_before_rl_reports_what_it_has(tmp_path):
  write_workdir(tmp_path / "work", folders=("eval_zero_shot", "eval_sft"), rl_iterations=0)
  text = proof_report.write_report(tmp_path / "work", tmp_path / "out")
  tables = table_rows(text)
  assert list(tables["valid_seen (memex regime, greedy)"]) == ["zero-shot", "SFT"]
  assert list(tables["Stage times"]) == ["sft", "eval_zero_shot", "eval_sft", "**total**"]
  report = json.loads((tmp_path / "out" / "report.json").read_text())
  assert "SFT+RL" not in report["evaluations"] and report["rl_curve"] == []
  check_figures(tmp_path / "out")


def test_an_evaluation_stopped_early_reports_its_finished_episodes(tmp_path):
  """No evaluation.json: the row summarizes the trajectories' finished episodes, marked."""
  write_workdir(tmp_path / "work", folders=("eval_zero_shot",), rl_iterations=0)
  played = EPISODES["eval_sft"][0][:3]  # valid_unseen only, 3 episodes, a torn last line
  path = tmp_path / "work" / "eval_sft" / "trajectories" / "valid_unseen_memex.jsonl"
  records.write_records(path, [{"index": i, "metrics": m} for i, m in enumerate(played)])
  with path.open("a") as f:
    f.write('{"index": 3, "metr')
  (path.parent / "evaluated.json").write_text("{}")
  text = proof_report.write_report(tmp_path / "work", tmp_path / "out")
  unseen = table_rows(text)["valid_unseen (memex regime, greedy)"]
  assert list(unseen) == ["zero-shot", "SFT (unfinished)"]
  want = records.summarize(played)
  assert unseen["SFT (unfinished)"]["episodes"] == "3"
  assert mean_and_se(unseen["SFT (unfinished)"]["success ± SE"]) == pytest.approx(
      (want["success"], want["success_se"]), abs=1e-3)
  assert list(table_rows(text)["valid_seen (memex regime, greedy)"]) == ["zero-shot"]
  check_figures(tmp_path / "out")


def test_a_malformed_evaluation_is_named(tmp_path):
  write_workdir(tmp_path / "work")
  (tmp_path / "work" / "eval_sft" / "evaluation.json").write_text('{"results": ')
  with pytest.raises(ValueError, match="eval_sft/evaluation.json: not JSON"):
    proof_report.write_report(tmp_path / "work", tmp_path / "out")


def test_a_missing_workdir_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such proof workdir"):
    proof_report.write_report(tmp_path / "typo", tmp_path / "out")


def test_a_rerun_with_other_settings_reports_the_command_of_each_stage(tmp_path):
  """launch/stage.sh, run by bash: the rerun skips the stage done before and records its own
  command for the stage it runs; the report names both commands, stage by stage."""
  work = tmp_path / "work"
  work.mkdir()
  script = ('source launch/stage.sh; WORK="$1"; PYTHON=python3; RUN_COMMAND="$2"; '
            'stage first "$1/first" touch "$1/first"; stage second "$1/second" touch "$1/second"')
  for command, then in (("A=1 run", "false"), ("A=2 run", "true")):  # stops after the first
    script_now = script.replace('stage second', f'{then} && stage second')
    subprocess.run(["bash", "-c", script_now, "bash", str(work), command], check=False,
                   cwd=pathlib.Path(proof_report.__file__).parents[1])
  stages = json.loads((work / "stages.json").read_text())
  assert [(s["name"], s["command"]) for s in stages["stages"]] == [("first", "A=1 run"),
                                                                   ("second", "A=2 run")]
  text = proof_report.write_report(work, tmp_path / "out")
  assert "- first: `A=1 run`\n- second: `A=2 run`\n" in text and "Command: `" not in text
