"""Eq. 1 penalties computed by hand, on records and on a known agent-loop trajectory."""

import json
import re

import pytest

from memex_jax.agent import (AgentConfig, EpisodeSpec, RedundancyTracker, RewardWeights,
                             ScriptedPolicy, StepRecord, run_episodes, shaped_reward)
from memex_jax.envs.toy import VaultEnv, VaultTask


def _call(name, **arguments):
  return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def test_penalties_by_hand_on_records():
  steps = [StepRecord(50, tool_call=True), StepRecord(150, tool_call=True, redundant=True),
           StepRecord(300, compressed=True), StepRecord(120, malformed=True),
           StepRecord(90, tool_call=True)]
  reward = shaped_reward(1.0, steps, threshold=100)
  assert reward.context == pytest.approx((50 + 20) / (100 * 5))  # Step 3 compressed.
  assert reward.redundancy == pytest.approx(1 / 3)
  assert reward.format == pytest.approx(1 / 5)
  assert reward.total == pytest.approx(1.0 - 0.14 - 1 / 3 - 0.2)
  weighted = shaped_reward(1.0, steps, 100, RewardWeights(context=2.0, redundancy=0.0,
                                                           format=0.5))
  assert weighted.total == pytest.approx(1.0 - 0.28 - 0.1)


def test_penalties_are_bounded_and_defined_without_calls():
  reward = shaped_reward(0.0, [StepRecord(10_000, malformed=True)], threshold=100)
  assert reward.context == 1.0 and reward.format == 1.0 and reward.redundancy == 0.0
  assert shaped_reward(1.0, [], threshold=100).total == 1.0
  with pytest.raises(ValueError, match="threshold must be positive"):
    shaped_reward(1.0, [], threshold=0)


def test_redundancy_needs_an_unchanged_state_since_the_identical_call():
  tracker = RedundancyTracker()
  calls = [("look", False), ("look", False), ("go east", True), ("look", False),
           ("look", False), ("go east", True), ("open drawer", True), ("open drawer", False),
           ("open drawer", False)]
  assert [tracker.record(sig, changed) for sig, changed in calls] == [
      False, True, False, False, True, False, False, False, True]


def test_penalties_by_hand_on_a_known_trajectory(renderer):
  look = _call("execute", command="look")
  script = [look, look, "I am not sure what to do.", _call("execute", command="read note"),
            look, _call("CompressExperience", summary="Read the note."),
            _call("ReadExperience", index="nothing"), look, _call("Finish", answer="none")]
  config = AgentConfig(mode="memex", threshold=300, max_turn_tokens=64)
  [trajectory] = run_episodes(ScriptedPolicy(renderer, [script]),
                              [EpisodeSpec(VaultEnv(), VaultTask(seed=4))], renderer, config)
  # C_t is the working size in the ContextStatus line right before each assistant turn.
  working = []
  for segment in trajectory.segments:
    for before, message in zip(segment.messages, segment.messages[1:]):
      if message.role == "assistant":
        working.append(int(re.search(r"working=(\d+)", before.content).group(1)))
  assert len(working) == 9
  overflow = sum(max(0, w - 300) for t, w in enumerate(working, 1) if t != 6)
  assert 0 < overflow < 300 * 9
  reward = trajectory.reward
  assert reward.context == pytest.approx(min(1.0, overflow / (300 * 9)))
  # Non-memory calls: looks at 1, 2, 5, 8, read note at 4, Finish at 9; 2 and 8 repeat a look
  # with no state change since (5 follows the note crumbling).
  assert reward.num_tool_calls == 6 and reward.num_redundant == 2
  assert reward.redundancy == pytest.approx(2 / 6)
  assert reward.num_malformed == 1 and reward.format == pytest.approx(1 / 9)
  assert reward.task == 0.0
  assert reward.total == pytest.approx(-reward.context - 2 / 6 - 1 / 9)
  metrics = trajectory.metrics
  assert metrics.finish_reason == "finish" and trajectory.answer == "none"
  assert metrics.num_compress == 1 and metrics.num_read == 0
  assert metrics.peak_working == max(working)
  assert metrics.mean_working == pytest.approx(sum(working) / 9)
  assert all(sample.reward == reward.total for sample in trajectory.samples)
