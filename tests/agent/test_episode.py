"""The whole turn path under adversarial model text: whatever a model writes, the episode is scored.

A scripted policy plays hypothesis-drawn turns (valid and broken tool calls, arbitrary unicode,
JSON escapes of lone surrogates, non-finite numbers, deep nesting, huge strings, raw token ids)
through `run_episodes` on VaultEnv and on a generated ALFWorld game, with the real SmolLM2
tokenizer. Whatever the turns: the batch finishes, every malformed turn is counted in P_format,
and every block the store accepted is still there, verbatim.
"""

import json
import os

import hypothesis
from hypothesis import strategies as st
import pytest

from memex_jax.agent import (ENV_ERROR, FINISH_REASONS, MAX_NESTING, MEMEX, MODES, AgentConfig,
                             EpisodeSpec, ScriptedPolicy, parse_turn, run_episodes,
                             tool_response)
from memex_jax.envs.alfworld import generate
from memex_jax.envs.alfworld.env import AlfWorldEnv, memex_harder
from memex_jax.envs.toy import VaultEnv, VaultTask, vault_code
from memex_jax.memory import COMPRESS, FINISH, INDEX_PATTERN, READ
from memex_jax.memory.tools import ANCHOR_KEYS

TASK = VaultTask(seed=3, corridor_length=2)


def _weighted(*choices):
  """A draw from one of the (weight, strategy) `choices`, picked in proportion to its weight.

  (`st.one_of` would not do: it draws each distinct strategy equally often.)
  """
  return st.sampled_from([s for weight, s in choices for _ in range(weight)]).flatmap(
      lambda strategy: strategy)


def _mostly(good, bad):
  """`good` three times in four: enough well-formed calls reach the tools."""
  return _weighted((3, good), (1, bad))


# Text a model may write: any unicode but lone surrogates (it samples tokens, which decode to
# text), huge strings, and the format's own markers mixed with characters that break things.
_MARKERS = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=",
            "</parameter>", "<|im_start|>", "<|im_end|>", "<tool_response>", "[Context Status:",
            "\x00", "\u202e", "\u200f", "\ufeff", "\r\n", "\\", '"', "{", "}", "\U0001f600"]
_HUGE = st.builds(lambda piece, n: piece * n, st.sampled_from(["y", "\u202e", "\x00 ", "é"]),
                  st.sampled_from([500, 5_000]))
_TEXT = _weighted((2, st.text(max_size=24)), (1, _HUGE),
                  (1, st.lists(st.sampled_from(_MARKERS) | st.text(max_size=4), max_size=8)
                   .map("".join)))
# Anchors: wild ones (nothing, everything, text every context holds), and phrases of the two
# envs' observations, unique or not.
_ANCHORS = _weighted(
    (1, _TEXT), (1, st.sampled_from(["", " ", "e", "\n", ".", "Status", "<tool_response>"])),
    (3, st.sampled_from(["A folded note", "The note reads", "You are in", "entrance hall",
                         "Looking quickly", "You arrive at", "Nothing happens", "walls", "code",
                         "a ", "table.", "reading.", "Exits:", "east.", "1."])))
_BAD_INDICES = st.sampled_from(["", "a b", "x" * 65, "nöte", "note_0\n", 7, None, [1]])
# db_content blocks use note_* indices and anchored ones span_*: a test can predict the first.
_NOTE_INDICES = _mostly(st.sampled_from([f"note_{i}" for i in range(6)]), _BAD_INDICES)
_SPAN_INDICES = _mostly(st.sampled_from([f"span_{i}" for i in range(4)]), _BAD_INDICES)
_NOTE_BLOCK = st.fixed_dictionaries(
    {"index": _NOTE_INDICES, "db_content": _mostly(_TEXT, st.integers())},
    optional={"description": _mostly(_TEXT, st.none())})
_SPAN_BLOCK = st.fixed_dictionaries(
    {"index": _SPAN_INDICES, **{key: _ANCHORS for key in ANCHOR_KEYS}},
    optional={"description": _TEXT})


def _tool_calls(commands):
  """(name, arguments) of calls to every tool, unknown ones included, with wild arguments."""
  def call(name, **arguments):
    return st.tuples(st.just(name), st.fixed_dictionaries(arguments))
  return _weighted(
      (2, call("execute", command=st.sampled_from(commands) | _TEXT)),
      (3, call(COMPRESS, summary=_mostly(_TEXT, st.none()),
               db_blocks=st.lists(_NOTE_BLOCK, max_size=3) | st.lists(_SPAN_BLOCK, max_size=3))),
      (2, call(READ, index=_mostly(st.sampled_from(["note_0", "span_0", "nowhere"]),
                                   _BAD_INDICES))),
      (1, call(FINISH, answer=_TEXT)),
      (1, st.tuples(_TEXT, st.dictionaries(st.text(max_size=4), _TEXT, max_size=2))))


def _rendered(call, ensure_ascii):
  name, arguments = call
  payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=ensure_ascii)
  return f"<tool_call>\n{payload}\n</tool_call>"


# Turns that must be malformed: each site holds one poison (a lone surrogate escape, a
# non-finite number, nesting past MAX_NESTING).
_SURROGATE_SITES = [
    '{"name": "CompressExperience", "arguments": {"summary": "x@"}}',
    '{"name": "CompressExperience", "arguments": {"summary": "s", "db_blocks": '
    '[{"index": "note_0", "db_content": "@"}]}}',
    '{"name": "execute", "arguments": {"command": "go east@"}}',
    '{"name": "ReadExperience@", "arguments": {"index": "note_0"}}',
    '{"name": "Finish", "arguments": {"answer@": "x"}}',
]
_VALUE_SITE = '{"name": "execute", "arguments": {"command": "look", "x": @}}'
_MALFORMED = st.one_of(
    st.builds(lambda site, escape: site.replace("@", escape), st.sampled_from(_SURROGATE_SITES),
              st.sampled_from(["\\ud800", "\\udbff", "\\udc00", "\\udfff", "\\ude00\\ud83d"])),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "[1, -Infinity]",
                     "[" * MAX_NESTING + "]" * MAX_NESTING, "[" * 3000 + "]" * 3000])
    .map(lambda value: _VALUE_SITE.replace("@", value)),
).map(lambda body: f"<tool_call>{body}</tool_call>")


def _archive(blocks):
  return (COMPRESS, {"summary": "Archived.", "db_blocks": blocks})


# Calls that usually succeed, so that stores fill up, indices collide and reads find blocks.
_ARCHIVE_NOTES = st.builds(
    lambda indices, contents: _archive([{"index": i, "description": "d", "db_content": c}
                                        for i, c in zip(indices, contents)]),
    st.lists(st.sampled_from([f"note_{i}" for i in range(4)]), min_size=1, max_size=3,
             unique=True), st.lists(st.text(max_size=40), min_size=3, max_size=3))
_ARCHIVE_SPAN = st.builds(
    lambda index, anchors: _archive([{"index": index, "description": "d",
                                      **dict(zip(ANCHOR_KEYS, anchors))}]),
    st.sampled_from(["span_0", "span_1"]),
    st.sampled_from([("A folded note", "lies", "table."), ("The note reads", "code", "reading."),
                     ("You are in", "walls", "Exits:"), ("You arrive", " ", "."),
                     ("Looking quickly", "you see", "."), ("Archived", "a", ".")]))
_READ = st.sampled_from(["note_0", "note_1", "note_2", "span_0", "span_1"]).map(
    lambda index: (READ, {"index": index}))


def _turns(commands):
  """(turn, must_be_malformed): text or raw ids (taken modulo the vocabulary); mostly calls."""
  calls = _weighted((4, _tool_calls(commands)), (2, _ARCHIVE_NOTES), (1, _ARCHIVE_SPAN),
                    (1, _READ))
  call = st.builds(_rendered, calls, st.booleans())
  return _weighted(
      (6, call.map(lambda turn: (turn, False))),
      (1, st.lists(call, min_size=2, max_size=4).map(lambda turns: ("\n".join(turns), False))),
      (1, _MALFORMED.map(lambda turn: (turn, True))),
      (1, _TEXT.filter(lambda t: "<tool_call>" not in t and "<function=" not in t)
       .map(lambda turn: (turn, True))),  # no call at all
      (1, _TEXT.map(lambda turn: (turn, False))),
      (1, st.lists(st.integers(0, 2**16), max_size=32).map(lambda ids: (ids, False))))


class _LoggedPolicy(ScriptedPolicy):
  """A ScriptedPolicy that keeps the ids it played, per episode."""

  def __init__(self, renderer, scripts):
    vocab = renderer.tokenizer.vocab_size
    super().__init__(renderer, [[t if isinstance(t, str) else [i % vocab for i in t]
                                 for t in script] for script in scripts])
    self.played = {i: [] for i in range(len(scripts))}

  def generate(self, requests):
    turns = super().generate(requests)
    for request, turn in zip(requests, turns):
      self.played[request.episode_id].append(turn.ids)
    return turns


def _archived_notes(calls):
  """The note_* blocks these calls must leave in a memex store (index -> content).

  Only calls whose blocks all give db_content are predicted; anchored spans depend on the
  context (their indices are span_*, so they never collide with these).
  """
  store = {}
  for call in calls:
    if call is None or call.name != COMPRESS:
      continue
    blocks = call.arguments.get("db_blocks", [])
    if not isinstance(call.arguments.get("summary"), str) or not isinstance(blocks, list):
      continue
    indices = [block.get("index") for block in blocks]
    if all(isinstance(index, str) and INDEX_PATTERN.fullmatch(index) and index not in store
           and isinstance(block.get("description", ""), str)
           and isinstance(block.get("db_content"), str)
           and not any(key in block for key in ANCHOR_KEYS)
           for index, block in zip(indices, blocks)) and len(set(indices)) == len(indices):
      store.update((block["index"], block["db_content"]) for block in blocks)
  return store


_ERROR_REPLY = "<tool_response>\nError: "  # a rejected tool call


def _check_scored(trajectory, played, must_be_malformed, renderer, config):
  """The episode was scored: every turn a step, every malformed one counted, store intact."""
  metrics = trajectory.metrics
  assert metrics.finish_reason in FINISH_REASONS
  assert (metrics.finish_reason == ENV_ERROR) == bool(trajectory.error)
  parsed = [parse_turn(renderer.assistant_text(ids)) for ids in played]
  assert metrics.steps == len(played)
  for turn, malformed in zip(parsed, must_be_malformed):
    assert turn.malformed or not malformed
  assert metrics.num_malformed == sum(turn.malformed for turn in parsed)
  assert metrics.p_format == pytest.approx(metrics.num_malformed / max(1, metrics.steps))
  for sample in trajectory.samples:
    sample.check()  # token_ids, loss_mask and rollout_logprobs agree in length
    assert len(sample.token_ids) <= config.context_window
  if config.mode != MEMEX:
    assert trajectory.memory == {}
    return
  notes = _archived_notes([turn.call for turn in parsed])
  assert {i: trajectory.memory[i]["content"] for i in notes} == notes
  working_texts = ["\n".join(m.content for m in s.messages[2:]) for s in trajectory.segments]
  for index, entry in trajectory.memory.items():
    if index not in notes:  # an anchored span: verbatim from a working context
      assert index.startswith("span_") and any(entry["content"] in w for w in working_texts)
  for segment in trajectory.segments:  # every read gives back the block, verbatim
    for turn, reply in zip(segment.messages, segment.messages[1:]):
      call = parse_turn(turn.content).call if turn.role == "assistant" else None
      if call and call.name == READ and not reply.content.startswith(_ERROR_REPLY):
        block = tool_response(trajectory.memory[call.arguments["index"]]["content"])
        assert reply.content.startswith(block.removesuffix("</tool_response>"))


def _fuzz_batch(renderer, specs, scripts, mode=MEMEX, threshold=2048, **config):
  """Runs (turn, must_be_malformed) scripts (cycled to the longest) and checks each episode."""
  steps = max(len(script) for script in scripts)
  scripts = [[script[i % len(script)] for i in range(steps)] for script in scripts]
  config = AgentConfig(**{"mode": mode, "threshold": threshold, "max_steps": steps,
                          "context_window": 131_072, "max_turn_tokens": 32_768, **config})
  policy = _LoggedPolicy(renderer, [[turn for turn, _ in script] for script in scripts])
  trajectories = run_episodes(policy, specs, renderer, config)
  for i, (trajectory, script) in enumerate(zip(trajectories, scripts)):
    _check_scored(trajectory, policy.played[i], [m for _, m in script], renderer, config)
  return trajectories


_VAULT_COMMANDS = ["look", "read note", "go east", "go west", "enter AAA-0000"]


@hypothesis.settings(max_examples=80, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow,
                                            hypothesis.HealthCheck.data_too_large])
@hypothesis.given(st.lists(st.lists(_turns(_VAULT_COMMANDS), min_size=1, max_size=10),
                           min_size=1, max_size=3),
                  st.sampled_from(MODES), st.sampled_from([64, 2048]))
def test_any_turns_on_the_toy_env_are_scored(renderer, scripts, mode, threshold):
  specs = [EpisodeSpec(VaultEnv(), TASK) for _ in scripts]
  _fuzz_batch(renderer, specs, scripts, mode, threshold)


@pytest.fixture(scope="module")
def alfworld_game(tmp_path_factory):
  """One generated valid_seen game on the real engine."""
  root = str(tmp_path_factory.mktemp("alfworld_game"))
  [record] = generate.generate_split(root, "valid_seen", num=1, seed=0, workers=1,
                                     progress=False)
  return os.path.join(root, record["path"])


@pytest.fixture(scope="module")
def alfworld_env():
  return AlfWorldEnv(memex_harder(max_steps=20))


_ALFWORLD_COMMANDS = ["look", "inventory", "go to sofa 1", "take laptop 1 from sofa 1",
                      "examine sofa 1", "help", "go to shelf 1", "put laptop 1 in/on sofa 1"]


@hypothesis.settings(max_examples=12, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow,
                                            hypothesis.HealthCheck.data_too_large])
@hypothesis.given(st.lists(_turns(_ALFWORLD_COMMANDS), min_size=2, max_size=8),
                  st.lists(_turns(_VAULT_COMMANDS), min_size=1, max_size=4))
def test_any_turns_on_a_real_alfworld_game_are_scored(renderer, alfworld_env, alfworld_game,
                                                      alfworld_script, vault_script):
  specs = [EpisodeSpec(alfworld_env, alfworld_game), EpisodeSpec(VaultEnv(), TASK)]
  _fuzz_batch(renderer, specs, [alfworld_script, vault_script], MEMEX, 512)


def _call(name, **arguments):
  return _rendered((name, arguments), ensure_ascii=False), False


def test_the_issue_turns_are_scored_and_the_batch_goes_on(renderer):
  poisoned = [
      ('<tool_call>{"name": "CompressExperience", "arguments": {"summary": "x\\ud800"}}'
       "</tool_call>", True),
      ('<tool_call>{"name": "execute", "arguments": {"command": "look", "x": NaN}}</tool_call>',
       True),
      ('<tool_call>{"name": "CompressExperience", "arguments": {"summary": "s", "db_blocks": '
       '[{"index": "n", "description": "d", "db_content": "\\ud800"}]}}</tool_call>', True),
      _call(READ, index="n"), _call(FINISH, answer="done")]
  winning = [_call("execute", command=c) for c in
             ("read note", "go east", "go east", "go east", f"enter {vault_code(TASK.seed)}")]
  [bad, good] = _fuzz_batch(renderer, [EpisodeSpec(VaultEnv(), TASK) for _ in range(2)],
                            [poisoned, winning])
  assert bad.metrics.finish_reason == "finish" and bad.metrics.num_malformed == 3
  assert bad.metrics.p_format == pytest.approx(3 / 5) and bad.memory == {}
  replies = [m.content for m in bad.segments[0].messages[4::2]]  # after each turn
  assert replies[0].startswith("Format error (invalid_text)") and "\\ud800" in replies[0]
  assert replies[1].startswith("Format error (invalid_json): ") and "NaN" in replies[1]
  assert replies[2].startswith("Format error (invalid_text)")
  assert "unknown index 'n'" in replies[3]
  assert good.metrics.success and good.metrics.p_format == 0.0


class _LogFileEnv:
  """Shows a log file as Python reads OS data (errors="surrogateescape"): the file's bytes that
  are not UTF-8 become lone surrogates, which no tokenizer encodes."""

  def __init__(self, path):
    self._path = path

  def _read(self):
    with open(self._path, encoding="utf-8", errors="surrogateescape") as f:
      return f.read()

  def reset(self, task):
    return "Report the log's last line.", self._read() if task == "show" else "`cat` shows it."

  def step(self, command):
    del command
    return self._read(), False, False, {"changed_state": False}

  def changes_state(self, command):
    del command
    return False


def test_env_text_that_cannot_be_tokenized_is_an_env_error(renderer, tmp_path):
  log = tmp_path / "run.log"
  log.write_bytes(b"ok\n\xff\xfe broken\n")
  specs = [EpisodeSpec(_LogFileEnv(str(log)), "show"), EpisodeSpec(_LogFileEnv(str(log)), "ask"),
           EpisodeSpec(VaultEnv(), TASK)]
  scripts = [[_call("execute", command="cat")]] * 2 + [[_call(FINISH, answer="x")]]
  at_reset, at_step, fine = _fuzz_batch(renderer, specs, scripts)
  reason = "the environment's text cannot be tokenized: it holds a lone surrogate \\udcff"
  assert at_reset.metrics.finish_reason == ENV_ERROR and at_reset.segments == ()
  assert at_reset.error == f"reset failed: {reason} at character 3"
  assert at_step.metrics.finish_reason == ENV_ERROR and at_step.metrics.steps == 1
  assert at_step.error == f"step('cat') failed: {reason} at character 3"
  assert fine.metrics.finish_reason == "finish"


def test_thousands_of_blocks_in_one_compression_are_all_kept(renderer):
  notes = [{"index": f"b{i}", "description": f"block {i}", "db_content": f"content {i}"}
           for i in range(3000)]
  anywhere = [{"index": f"s{i}", "start_anchor": anchor, "mid_anchor": "e", "end_anchor": "."}
              for i, anchor in enumerate(["e", "no such text"] * 1000)]  # all, then no match
  collision = [{"index": "b7", "db_content": "again"}, {"index": "fresh", "db_content": "x"}]
  script = [_call(COMPRESS, summary="s", db_blocks=notes), _call(READ, index="b2999"),
            _call(COMPRESS, summary="s", db_blocks=anywhere),
            _call(COMPRESS, summary="s", db_blocks=collision), _call(FINISH, answer="x")]
  [trajectory] = _fuzz_batch(renderer, [EpisodeSpec(VaultEnv(), TASK)], [script],
                             context_window=400_000, max_turn_tokens=200_000)
  assert trajectory.metrics.finish_reason == "finish"
  assert trajectory.metrics.num_compress == 1 and trajectory.metrics.num_read == 1
  assert {i: e["content"] for i, e in trajectory.memory.items()} == {
      b["index"]: b["db_content"] for b in notes}
  replies = [m.content for m in trajectory.segments[1].messages[4::2]]  # after each turn
  assert replies[0].startswith("<tool_response>\ncontent 2999\n</tool_response>")
  assert "db_blocks[0] (s0): start_anchor 'e' is not unique" in replies[1]
  assert "db_blocks[1999] (s1999): start_anchor 'no such text' was not found" in replies[1]
  assert "db_blocks[0]: index 'b7' already exists" in replies[2]
