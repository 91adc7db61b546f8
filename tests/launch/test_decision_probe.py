"""The teacher-forced decision probe, on the expert's demonstrations of generated games through
the real engine, with the packaged SmolLM2 weights."""

import json

import numpy as np
import pytest

from launch import decision_probe
from memex_jax.agent import ChatRenderer
from memex_jax.agent.chat import Message
from memex_jax.demos import alfworld_text, dataset, decisions
from memex_jax.envs.alfworld import games


@pytest.fixture(scope="module")
def demos_folder(games_root, tmp_path_factory):
  out = str(tmp_path_factory.mktemp("probe_demos"))
  dataset.write_demonstrations(games.find_games(games_root, "valid_seen")[:4], out, num=2,
                               seed=0, games_root=games_root, progress=False)
  return out


@pytest.fixture(scope="module")
def forward(smollm2):
  return decision_probe.make_forward(*smollm2)


def test_each_decision_is_read_where_its_own_prefix_ends(demos_folder, forward,
                                                         smollm2_tokenizer):
  renderer = ChatRenderer(smollm2_tokenizer)
  search_on_id = smollm2_tokenizer.encode(alfworld_text.SEARCH_ON)[0]
  records = dataset.demonstration_records(demos_folder)
  checked = 0
  for record in records:
    for messages in record["segments"]:
      found = list(alfworld_text.segment_decisions(messages))
      rows = decision_probe.probe_segment(forward, renderer, search_on_id, messages)
      assert [r["present"] for r in rows] == [d.present for d in found]
      for d, row in zip(found, rows):
        # The prefix alone, through the sought kind: the last position's P(search on) and the
        # argmax copies of the restated tokens must be the ones read off the whole segment.
        chat = [Message(m["role"], m["content"]) for m in messages]
        text = chat[d.turn].content
        assert row["restated"].strip() == text[d.match.start(1):d.decides_at]
        ids = (renderer.render(chat[:d.turn]).ids + renderer.generation_prompt_ids() +
               smollm2_tokenizer.encode(text[:d.decides_at]))
        n = row["list_tokens"]
        assert smollm2_tokenizer.decode(ids[len(ids) - n:]) == row["restated"]
        logits = forward(np.asarray(ids), np.arange(len(ids) - n - 1, len(ids)))
        copied = np.argmax(logits[:n], -1) == np.asarray(ids[len(ids) - n:])
        assert row["list_tokens_copied"] == int(copied.sum())
        p = np.exp(logits[n] - logits[n].max())
        assert row["p_search_on"] == pytest.approx(p[search_on_id] / p.sum(), abs=2e-4)
        assert row["takes"] == (int(np.argmax(logits[n])) != search_on_id)
        checked += 1
  assert checked >= 3


def test_the_command_counts_every_decision_and_writes_its_rows(demos_folder, tmp_path,
                                                               capsys):
  out = tmp_path / "probe.json"
  counts = decision_probe.main(["--demos", demos_folder, "--num", "2", "--label", "packaged",
                                "--out", str(out)])
  expert = decisions.count_decisions(dataset.demonstration_records(demos_folder))
  # Where the places held the kind is the engine's; what the policy decided there is its own.
  assert counts["absent_no"] + counts["absent_take"] == expert["absent_no"] + expert["absent_take"]
  assert counts["present_take"] + counts["present_no"] == (
      expert["present_take"] + expert["present_no"])
  assert counts["restated"] == expert["restated"] > 0
  saved = json.loads(out.read_text())
  assert saved["command"].startswith("python -m launch.decision_probe --demos")
  assert len(saved["decisions"]) == counts["restated"]
  assert 0.0 <= counts["p_search_on_absent"] <= 1.0
  printed = capsys.readouterr().out
  assert f"| packaged | {counts['absent_no']} / {counts['absent_take']} |" in printed
