"""Trajectory records: written as JSON lines, read back past a torn line, summarized."""

import json
import math

import pytest

from memex_jax.agent import records
from memex_jax.agent.trajectory import EpisodeMetrics


def _metrics(success, steps, reason="finish"):
  return EpisodeMetrics(
      success=success, score=float(success), steps=steps, peak_working=100 * steps,
      mean_working=50.0,
      total_tokens=10, generated_tokens=5, num_compress=1, num_read=0, num_truncations=0,
      num_segments=2, num_redundant=0, num_malformed=0, num_tool_calls=3, p_context=0.5,
      p_redundancy=0.0, p_format=0.25, reward=float(success) - 0.75,
      finish_reason=reason).as_dict()


def test_appended_records_survive_a_torn_last_line(tmp_path):
  path = tmp_path / "run" / "episodes.jsonl"
  assert records.read_records(path) == []
  records.write_records(path, [{"index": 0}, {"index": 1}])
  records.write_records(path, [{"index": 2}], append=True)
  with path.open("a") as f:
    f.write('{"index": 3, "metr')  # killed mid-write
  assert [r["index"] for r in records.read_records(path)] == [0, 1, 2]
  path.write_text('{"index": 0}\nnot json\n{"index": 2}\n')
  with pytest.raises(ValueError, match="episodes.jsonl:2: not a JSON record"):
    records.read_records(path)


def test_summary_has_means_standard_errors_penalty_and_finish_shares():
  rows = [_metrics(True, 2), _metrics(False, 4, "max_steps"), _metrics(False, 6, "max_steps")]
  summary = records.summarize(json.loads(json.dumps(rows)))
  assert summary["episodes"] == 3 and summary["success"] == pytest.approx(1 / 3)
  assert summary["steps"] == 4.0 and summary["steps_se"] == pytest.approx(2 / math.sqrt(3))
  assert summary["penalty"] == pytest.approx(-0.75)
  assert summary["finish_finish"] == pytest.approx(1 / 3)
  assert summary["finish_max_steps"] == pytest.approx(2 / 3)
  assert set(records.METRIC_KEYS) < set(summary) and "finish_reason" not in summary


def _episode(index, success):
  return {"game": f"valid_unseen/game_{index}", "trajectory_id": index, "task": "put a cup in sink",
          "metrics": _metrics(success, 3), "error": "",
          "segments": [[{"role": "system", "content": "SYSTEM PROMPT"},
                        {"role": "user", "content": "put a cup in sink"},
                        {"role": "assistant", "content": f"call {index}a"}],
                       [{"role": "system", "content": "SYSTEM PROMPT"},
                        {"role": "assistant", "content": f"call {index}b"}]]}


def test_an_episode_renders_in_order_without_its_system_prompts():
  text = records.render_record(_episode(7, True))
  assert text.startswith("# valid_unseen/game_7\n") and "success True" in text
  assert "SYSTEM PROMPT" not in text
  assert text.index("## Segment 1") < text.index("call 7a") < text.index("## Segment 2") \
      < text.index("call 7b")


def test_show_prints_the_won_episodes_or_says_the_index_is_missing(tmp_path, capsys):
  from memex_jax.agent import show  # pylint: disable=g-import-not-at-top
  path = tmp_path / "episodes.jsonl"
  records.write_records(path, [_episode(0, False), _episode(1, True), _episode(2, False)])
  assert show.main([str(path), "--won"]) == 0
  out = capsys.readouterr().out
  assert "game_1" in out and "game_0" not in out and "game_2" not in out
  assert show.main([str(path), "--index", "2"]) == 0
  assert "call 2b" in capsys.readouterr().out
  assert show.main([str(path), "--index", "3"]) == 2
  assert "has 3 records; there is no index 3" in capsys.readouterr().err
