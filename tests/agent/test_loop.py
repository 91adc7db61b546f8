"""The batched agent loop on VaultEnv with scripted policies (real tokenizer, real env)."""

import json
import os
import re

import pytest

from memex_jax.agent import (AgentConfig, EpisodeSpec, Message, ScriptedPolicy, Turn,
                             run_episodes)
from memex_jax.envs.alfworld import games
from memex_jax.envs.alfworld.env import AlfWorldEnv, memex_harder
from memex_jax.envs.pool import EnvPool
from memex_jax.envs.pooled import PooledEnv
from memex_jax.envs.toy import VaultEnv, VaultTask, vault_code
from memex_jax.memory import parse_status

TASK = VaultTask(seed=7, corridor_length=4)


def _call(name, **arguments):
  payload = json.dumps({"name": name, "arguments": arguments})
  return f"Next step.\n<tool_call>\n{payload}\n</tool_call>"


def _go(command):
  return _call("execute", command=command)


def _enter_code_seen_in_context(context: str) -> str:
  """Enters the last code the context shows, or a guess when it shows none."""
  codes = re.findall(r"Vault code: ([A-Z]{3}-\d{4})", context)
  return _go(f"enter {codes[-1] if codes else 'AAA-0000'}")


ARCHIVE_NOTE = _call("CompressExperience", summary="Read the note; walking east to the vault.",
                     db_blocks=[{"index": "vault_note", "description": "note with the code",
                                 "start_anchor": "The note reads", "mid_anchor": "Vault code",
                                 "end_anchor": "Burn after reading."}])
MEMEX_SCRIPT = ([_go("read note")] + [_go("go east")] * 3 + [ARCHIVE_NOTE] +
                [_go("go east")] * 2 + [_call("ReadExperience", index="vault_note"),
                                        _enter_code_seen_in_context])


def _run(renderer, scripts, tasks=None, policy=None, envs=None, **config):
  config = AgentConfig(**{"threshold": 300, "max_turn_tokens": 256, **config})
  tasks = tasks or [TASK] * len(scripts)
  policy = policy or ScriptedPolicy(renderer, scripts)
  envs = envs or [VaultEnv() for _ in tasks]
  return run_episodes(policy, [EpisodeSpec(env, task, group_id=3)
                               for env, task in zip(envs, tasks)], renderer, config)


def test_memex_reads_the_code_back_and_wins_where_summary_only_loses(renderer):
  [memex] = _run(renderer, [MEMEX_SCRIPT], mode="memex")
  [summary_only] = _run(renderer, [MEMEX_SCRIPT], mode="summary_only")
  assert memex.metrics.success and memex.metrics.finish_reason == "env_done"
  assert memex.metrics.num_compress == 1 and memex.metrics.num_read == 1
  assert memex.metrics.num_segments == 2
  assert not summary_only.metrics.success and summary_only.memory == {}
  assert summary_only.metrics.num_compress == 1 and summary_only.metrics.num_read == 0
  read_reply = summary_only.segments[1].messages[-2].content
  assert "ReadExperience is not available in this memory regime" in read_reply


def test_full_context_baseline_loses_the_note_to_hard_truncation(renderer):
  script = ([_go("read note")] + [_go("go east")] * 5 + [_enter_code_seen_in_context])
  [roomy] = _run(renderer, [script], mode="full_context")
  assert roomy.metrics.success and roomy.metrics.num_truncations == 0
  fixed = len(renderer.render(roomy.segments[0].messages[:2]).ids)
  [tight] = _run(renderer, [script], mode="full_context", context_window=fixed + 600)
  assert tight.metrics.num_truncations >= 1 and not tight.metrics.success
  assert tight.metrics.finish_reason == "env_done"
  assert all(len(s.sample.token_ids) <= fixed + 600 for s in tight.segments)
  last = tight.segments[-1]
  assert last.messages[0].role == "system" and last.messages[1].role == "user"
  assert "Vault code" not in renderer.tokenizer.decode(last.sample.token_ids)


def test_anchors_archive_the_exact_span_of_the_observation(renderer):
  [trajectory] = _run(renderer, [MEMEX_SCRIPT])
  env = VaultEnv()
  env.reset(TASK)
  note = env.step("read note")[0]
  start = note.index("The note reads")
  end = note.index("Burn after reading.") + len("Burn after reading.")
  assert trajectory.memory["vault_note"] == {"content": note[start:end],
                                             "description": "note with the code", "step": 4}
  summary = trajectory.segments[1].messages[2].content
  assert "- vault_note: note with the code" in summary
  assert vault_code(TASK.seed) not in summary


class _CharSplitPolicy(ScriptedPolicy):
  """Spells each character as its own token: valid ids a re-tokenizer would never produce."""

  def __init__(self, renderer, scripts):
    super().__init__(renderer, scripts)
    self.log = []

  def generate(self, requests):
    turns = []
    for request, turn in zip(requests, super().generate(requests)):
      text = self._renderer.assistant_text(turn.ids)
      ids = [i for ch in text for i in self._renderer.tokenizer.encode(ch)]
      ids = (ids + [self._renderer.end_id])[:request.max_new_tokens]
      logprobs = tuple(-0.001 * (k + 1) for k in range(len(ids)))
      turns.append(Turn(tuple(ids), logprobs))
      self.log.append((request, turns[-1]))
    return turns


def test_token_in_token_out_ids_are_sampled_ids_plus_observation_ids(renderer):
  policy = _CharSplitPolicy(renderer, [MEMEX_SCRIPT])
  [trajectory] = _run(renderer, [MEMEX_SCRIPT], policy=policy, max_turn_tokens=1024)
  assert trajectory.metrics.success
  groups = []
  for request, turn in policy.log:
    if request.reset:
      groups.append([])
    groups[-1].append((request, turn))
  assert len(groups) == len(trajectory.segments) == 2
  for segment, group in zip(trajectory.segments, groups):
    ids, mask, logprobs = [], [], []
    for request, turn in group:
      ids += list(request.new_ids) + list(turn.ids)
      mask += [0] * len(request.new_ids) + [1] * len(turn.ids)
      logprobs += [0.0] * len(request.new_ids) + list(turn.logprobs)
    closing = renderer.closing_ids(group[-1][1].ids)
    assert segment.sample.token_ids.tolist() == ids + closing
    assert segment.sample.loss_mask.tolist() == mask + [0] * len(closing)
    assert segment.sample.rollout_logprobs.tolist() == pytest.approx(
        logprobs + [0.0] * len(closing))
    # The sampled spelling survives: re-tokenizing the same text gives other ids.
    assert renderer.render(segment.messages).ids != segment.sample.token_ids.tolist()
  # A follow-up request carries the closing, the observation message and the turn header.
  request, previous = policy.log[1][0], policy.log[0][1]
  observation = trajectory.segments[0].messages[4]
  assert list(request.new_ids) == (renderer.closing_ids(previous.ids) +
                                   renderer.message_ids(observation) +
                                   renderer.generation_prompt_ids())


def test_a_demonstration_renders_to_the_ids_the_loop_built(renderer):
  [trajectory] = _run(renderer, [MEMEX_SCRIPT])
  for segment in trajectory.segments:
    rendered = renderer.render(segment.messages)
    assert rendered.ids == segment.sample.token_ids.tolist()
    assert rendered.loss_mask == segment.sample.loss_mask.tolist()
  second = trajectory.segments[1].messages
  assert [m.role for m in second[:3]] == ["system", "user", "user"]
  assert second[:2] == trajectory.segments[0].messages[:2]
  assert second[2].content.startswith("<tool_response>\n[Indexed Summary]\nProgress state:\n"
                                       "Read the note; walking east")
  assert re.search(r"</tool_response>\n\[Context Status: working=\d+, total=\d+, "
                   r"threshold=300\]$", second[2].content)
  # The summary's status counts the new working context: the summary message only.
  working = int(re.search(r"working=(\d+)", second[2].content).group(1))
  body = second[2].content.split("\n[Context Status")[0]
  assert working == len(renderer.message_ids(Message("user", body)))


def test_rejected_memory_calls_leave_the_context_and_store_unchanged(renderer):
  again = _call("CompressExperience", summary="again", db_blocks=[
      {"index": "vault_note", "description": "dup", "db_content": "x"}])
  script = [_go("read note"), ARCHIVE_NOTE, again, _call("ReadExperience", index="vault_nt"),
            _call("Lookup", what="code"), "<tool_call>{oops}</tool_call>",
            _call("Finish", answer="done")]
  [trajectory] = _run(renderer, [script])
  assert trajectory.metrics.num_compress == 1 and len(trajectory.segments) == 2
  assert list(trajectory.memory) == ["vault_note"]
  replies = [m.content for m in trajectory.segments[1].messages[3:] if m.role == "user"]
  assert "db_blocks[0]: index 'vault_note' already exists" in replies[0]
  assert "the context is unchanged" in replies[0]
  assert "unknown index 'vault_nt'; available indices: vault_note" in replies[1]
  assert ("unknown tool 'Lookup'; available tools: execute, CompressExperience, "
          "ReadExperience, Finish") in replies[2]
  assert replies[3].startswith("Format error (invalid_json)")
  assert trajectory.metrics.num_malformed == 1 and trajectory.answer == "done"


def _archive_under_the_offered_index(context: str) -> str:
  offered = parse_status(context).free_index
  return _call("CompressExperience", summary="Going east.", db_blocks=[
      {"index": offered or "unoffered", "description": "notes", "db_content": "east"}])


@pytest.mark.parametrize("offer", [True, False])
def test_the_over_threshold_warning_offers_the_next_unused_index(renderer, offer):
  script = [_archive_under_the_offered_index] * 3 + [_call("Finish", answer="x")]
  # threshold=1: every status is over the threshold, so every turn is offered an index.
  [trajectory] = _run(renderer, [script], threshold=1, offer_free_index=offer)
  if offer:
    assert list(trajectory.memory) == ["notes_1", "notes_2", "notes_3"]
    assert trajectory.metrics.num_compress == 3
  else:  # The same call each time: the second and third reuse the first's index.
    assert list(trajectory.memory) == ["unoffered"] and trajectory.metrics.num_compress == 1
  replies = [m.content for s in trajectory.segments for m in s.messages if m.role == "user"]
  assert any("(free index: notes_4)" in r for r in replies) == offer
  [summary_only] = _run(renderer, [script], threshold=1, mode="summary_only")
  assert not any("free index" in m.content for s in summary_only.segments for m in s.messages)


def test_episodes_end_independently_in_one_batch(renderer):
  scripts = [[_go("look"), _call("Finish", answer="a")],
             [_go("look")] * 5,
             MEMEX_SCRIPT]
  policy = ScriptedPolicy(renderer, scripts)
  trajectories = _run(renderer, scripts, policy=policy, max_steps=5)
  assert [t.metrics.finish_reason for t in trajectories] == ["finish", "max_steps", "max_steps"]
  assert [t.metrics.steps for t in trajectories] == [2, 5, 5]
  assert [t.trajectory_id for t in trajectories] == [0, 1, 2]
  assert {s.group_id for t in trajectories for s in t.samples} == {3}
  for episode in range(3):
    with pytest.raises(KeyError):  # Released: the policy holds no context for it.
      policy.context_ids(episode)


def test_context_overflow_ends_the_episode(renderer):
  [probe] = _run(renderer, [[_call("Finish", answer="x")]])
  fixed = len(renderer.render(probe.segments[0].messages[:2]).ids)
  [trajectory] = _run(renderer, [[_go("go east")] * 10], context_window=fixed + 500)
  assert trajectory.metrics.finish_reason == "context_overflow"
  assert 1 <= trajectory.metrics.steps < 10
  assert len(trajectory.segments[0].sample.token_ids) <= fixed + 500


def test_a_failing_environment_is_a_scored_failure(renderer):
  [broken, fine] = _run(renderer, [[], [_call("Finish", answer="x")]],
                        tasks=["not a VaultTask", TASK])
  assert broken.metrics.finish_reason == "env_error" and not broken.metrics.success
  assert "reset failed: TypeError" in broken.error and broken.segments == ()
  assert fine.metrics.finish_reason == "finish"


class _StepCountingPool(EnvPool):
  """A real EnvPool that also records how many episodes each step call carried."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.step_sizes = []

  def step(self, commands):
    self.step_sizes.append(len(commands))
    return super().step(commands)


def test_pooled_episodes_step_together_and_match_in_process_ones(renderer):
  # Episode 0 archives (a memory round without an env step); 1 finishes early; 2 walks.
  scripts = [MEMEX_SCRIPT, [_go("read note"), _call("Finish", answer="x")],
             [_go("go east")] * 4 + [_go("enter AAA-0000")]]
  tasks = [TASK, VaultTask(seed=8, corridor_length=4), VaultTask(seed=9, corridor_length=3)]
  want = _run(renderer, scripts, tasks=tasks)
  with _StepCountingPool(VaultEnv, num_workers=3, step_timeout_s=20) as pool:
    got = _run(renderer, scripts, tasks=tasks,
               envs=[PooledEnv(pool, episode_id=i) for i in range(3)])
  for g, w in zip(got, want):
    assert g.metrics == w.metrics and g.reward == w.reward and g.error == w.error
    assert [s.token_ids.tolist() for s in g.samples] == [s.token_ids.tolist() for s in w.samples]
  assert [t.metrics.finish_reason for t in got] == ["env_done", "finish", "env_done"]
  # One pool call per round with an env action, carrying every episode that ran one. Fewer
  # from round 2 (episode 1 finishes) and round 5 (0 archives); round 8 (0 reads) makes none.
  assert pool.step_sizes == [3, 2, 2, 2, 1, 1, 1, 1]


def test_a_waiting_episode_takes_the_place_of_one_that_ended(renderer):
  # Two workers, three episodes: 1 ends by Finish while its engine still runs it, so its worker
  # must be freed for 2 to start (round 3), which ends (round 7) before 0 archives and reads.
  scripts = [MEMEX_SCRIPT, [_go("read note"), _call("Finish", answer="x")],
             [_go("go east")] * 4 + [_go("enter AAA-0000")]]
  tasks = [TASK, VaultTask(seed=8, corridor_length=4), VaultTask(seed=9, corridor_length=3)]
  want = _run(renderer, scripts, tasks=tasks)
  ended = []
  with EnvPool(VaultEnv, num_workers=2, step_timeout_s=20) as pool:
    got = run_episodes(ScriptedPolicy(renderer, scripts),
                       [EpisodeSpec(PooledEnv(pool, i), task, group_id=3)
                        for i, task in enumerate(tasks)],
                       renderer, AgentConfig(threshold=300, max_turn_tokens=256), max_live=2,
                       on_end=lambda i, t: ended.append((i, t.trajectory_id)))
    assert pool.running == []
  for g, w in zip(got, want):
    assert g.metrics == w.metrics and g.reward == w.reward and g.error == w.error
    assert [s.token_ids.tolist() for s in g.samples] == [s.token_ids.tolist() for s in w.samples]
  assert [t.trajectory_id for t in got] == [0, 1, 2]
  assert [i for i, _ in ended] == [1, 2, 0] and all(i == t for i, t in ended)


class _DroppingPolicy(ScriptedPolicy):
  """Answers one request fewer than it was asked: a policy breaking its contract."""

  def generate(self, requests):
    return super().generate(requests)[1:]


def test_a_policy_breaking_its_contract_raises(renderer):
  # Unlike anything a model writes, this is a bug of the caller's code: it must not be scored.
  with pytest.raises(ValueError, match="the policy returned 1 turns for 2 requests"):
    _run(renderer, [[_go("look")]] * 2, policy=_DroppingPolicy(renderer, [[_go("look")]] * 2))


def test_the_env_partial_credit_is_the_episode_score(renderer, games_root, manifest):
  record = min((r for r in manifest if r["task_type"] == "pick_two_obj_and_place"),
               key=lambda r: r["num_receptacles"])
  folder = os.path.join(games_root, record["path"])
  with open(os.path.join(folder, games.GAME_FILE)) as f:
    commands = ["look"] + json.load(f)["walkthrough"]
  # One object of two placed: half the goal's conditions, no win.
  scripts = [[_go(c) for c in commands[:-2]] + [_call("Finish", answer="stopping here")],
             [_go(c) for c in commands]]
  halfway, won = _run(renderer, scripts, tasks=[folder, folder],
                      envs=[AlfWorldEnv(memex_harder()) for _ in scripts], threshold=4096,
                      context_window=8192, max_steps=len(commands))
  assert not halfway.metrics.success and halfway.metrics.score == 0.5
  assert won.metrics.success and won.metrics.score == 1.0


class _StrayTurnPolicy(ScriptedPolicy):
  """A streaming policy that answers for an episode nobody asked about: a contract breach."""

  def advance(self, requests):
    turns = dict(zip([r.episode_id for r in requests], self.generate(requests)))
    return {**turns, 99: next(iter(turns.values()))}


def test_a_turn_for_an_episode_never_asked_raises(renderer):
  with pytest.raises(ValueError, match=r"turns for episodes \[99\] never asked"):
    _run(renderer, [[_go("look")]], policy=_StrayTurnPolicy(renderer, [[_go("look")]]))
