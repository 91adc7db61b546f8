"""ScriptedPolicy: real token ids, context tracking, clear errors."""

import pytest

from memex_jax.agent import ScriptedPolicy, TurnRequest


def test_turn_is_tokenized_and_ends_with_im_end(renderer, smollm2_tokenizer):
  policy = ScriptedPolicy(renderer, [["hello there"]])
  [turn] = policy.generate([TurnRequest(0, (1, 2, 3), True, 64)])
  assert list(turn.ids) == smollm2_tokenizer.encode("hello there") + [renderer.end_id]
  assert turn.logprobs == (0.0,) * len(turn.ids)
  assert policy.context_ids(0) == [1, 2, 3] + list(turn.ids)


def test_turn_is_cut_to_max_new_tokens(renderer):
  policy = ScriptedPolicy(renderer, [["one two three four five six"]])
  [turn] = policy.generate([TurnRequest(0, (1,), True, 3)])
  assert len(turn.ids) == 3 and renderer.end_id not in turn.ids


def test_callable_turn_sees_the_decoded_context(renderer, smollm2_tokenizer):
  seen = []
  policy = ScriptedPolicy(renderer, [["first", lambda context: seen.append(context) or "x"]])
  prompt = tuple(smollm2_tokenizer.encode("the code is QXR"))
  policy.generate([TurnRequest(0, prompt, True, 16)])
  more = tuple(smollm2_tokenizer.encode(" and more"))
  policy.generate([TurnRequest(0, more, False, 16)])
  assert seen == ["the code is QXRfirst<|im_end|> and more"]
  policy.release(0)
  with pytest.raises(KeyError, match="continued without a reset"):
    policy.generate([TurnRequest(0, more, False, 16)])


def test_running_out_of_script_is_an_error(renderer):
  policy = ScriptedPolicy(renderer, [["only"]])
  policy.generate([TurnRequest(0, (1,), True, 8)])
  with pytest.raises(IndexError, match="turn 2 but its script has 1"):
    policy.generate([TurnRequest(0, (1,), True, 8)])
  with pytest.raises(KeyError, match="no script for episode 4"):
    policy.generate([TurnRequest(4, (1,), True, 8)])


def test_raw_id_turns_are_played_as_given(renderer, smollm2_tokenizer):
  lead_byte = smollm2_tokenizer.token_to_id("Ã")  # 0xC3 alone: not UTF-8 by itself
  policy = ScriptedPolicy(renderer, [[[lead_byte, lead_byte]]])
  [turn] = policy.generate([TurnRequest(0, (1,), True, 8)])
  assert list(turn.ids) == [lead_byte, lead_byte, renderer.end_id]
  assert renderer.assistant_text(turn.ids) == "\ufffd\ufffd"  # decoding replaces bad bytes
