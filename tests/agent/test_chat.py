"""The ChatML tool format rendered to ids with the real SmolLM2 tokenizer."""

import json
import re

import hypothesis
from hypothesis import strategies as st
import pytest

from memex_jax.agent import (ChatRenderer, Message, tool_response, tool_response_body,
                             tools_block)
from memex_jax.memory import finish_schema, read_schema
from memex_jax.tokenizers import Tokenizer


def test_chatml_markers_are_single_special_tokens(renderer, smollm2_tokenizer):
  assert renderer.start_id == smollm2_tokenizer.token_to_id("<|im_start|>")
  assert renderer.end_id == smollm2_tokenizer.token_to_id("<|im_end|>")
  assert renderer.header_ids("tool") == renderer.header_ids("user")


def test_conversation_ids_and_loss_mask(renderer, smollm2_tokenizer):
  messages = [Message("system", "sys"), Message("user", "task"),
              Message("assistant", 'go <tool_call>{"name": "x", "arguments": {}}</tool_call>'),
              Message("tool", "You see a door.")]
  rendered = renderer.render(messages)
  text = smollm2_tokenizer.decode(rendered.ids)
  assert text == ("<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\ntask<|im_end|>\n"
                  "<|im_start|>assistant\n" + messages[2].content + "<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nYou see a door.\n</tool_response>"
                  "<|im_end|>\n")
  trained = [i for i, m in zip(rendered.ids, rendered.loss_mask) if m]
  assert trained == smollm2_tokenizer.encode(messages[2].content) + [renderer.end_id]
  assert len(rendered.loss_mask) == len(rendered.ids)


def test_prompt_ids_end_with_the_generation_prompt(smollm2_tokenizer):
  renderer = ChatRenderer(smollm2_tokenizer, assistant_prefix="<tool_call>")
  messages = [Message("system", "Be brief."), Message("user", "Hi")]
  ids = renderer.prompt_ids(messages)
  assert ids == renderer.render(messages).ids + renderer.generation_prompt_ids()
  assert smollm2_tokenizer.decode(ids).endswith("<|im_end|>\n<|im_start|>assistant\n<tool_call>")


def test_closing_ids_complete_a_cut_turn(renderer):
  assert renderer.closing_ids([5, renderer.end_id]) == renderer.newline_ids
  assert renderer.closing_ids([5]) == [renderer.end_id] + renderer.newline_ids
  assert renderer.assistant_text(renderer.tokenizer.encode("hi") + [renderer.end_id]) == "hi"


def test_assistant_messages_are_not_rendered_alone(renderer):
  with pytest.raises(ValueError, match="assistant messages"):
    renderer.message_ids(Message("assistant", "x"))
  with pytest.raises(ValueError, match="Message.role"):
    Message("function", "x")


def test_tools_block_holds_one_schema_per_line():
  block = tools_block([read_schema(), finish_schema()])
  lines = block.splitlines()
  assert lines[0] == "<tools>" and lines[-1] == "</tools>"
  assert [json.loads(line)["function"]["name"] for line in lines[1:-1]] == [
      "ReadExperience", "Finish"]


def test_a_tokenizer_without_chatml_tokens_is_refused():
  import mistral_common  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top
  model = pathlib.Path(mistral_common.__file__).parent / "data" / "tokenizer.model.v1"
  with pytest.raises(ValueError, match="not one special token"):
    ChatRenderer(Tokenizer.load(model))


def test_assistant_prefix_is_context_and_part_of_the_turn_text(smollm2_tokenizer):
  prefix = '<tool_call>\n{"name": "'
  renderer = ChatRenderer(smollm2_tokenizer, assistant_prefix=prefix)
  plain = ChatRenderer(smollm2_tokenizer)
  prefix_ids = smollm2_tokenizer.encode(prefix)
  assert renderer.generation_prompt_ids() == plain.generation_prompt_ids() + prefix_ids
  sampled = smollm2_tokenizer.encode('execute", "arguments": {"command": "look"}}\n</tool_call>')
  text = renderer.assistant_text(sampled)
  assert text.startswith(prefix) and text.endswith("</tool_call>")
  rendered = renderer.render([Message("assistant", text)])
  assert rendered.ids[:len(renderer.generation_prompt_ids())] == renderer.generation_prompt_ids()
  assert sum(rendered.loss_mask) == len(smollm2_tokenizer.encode(text[len(prefix):])) + 1


def test_tool_response_body_reads_back_the_last_response():
  assert tool_response_body(tool_response("You see a door.\nIt is closed.")) == (
      "You see a door.\nIt is closed.")
  assert tool_response_body(tool_response("") + "\n[Context Status: ...]") == ""
  assert tool_response_body(tool_response("first") + "\nturn\n" + tool_response("last")) == "last"
  assert tool_response_body("<tool_response>\nunclosed") is None


def test_tool_response_body_is_found_by_a_forward_scan():
  # 20k unclosed openings: a lazy pattern retried at each took minutes; a forward scan, ms.
  context = tool_response("kept") + "<tool_response>\n" * 20_000
  assert tool_response_body(context) == "kept"
  # The first unclosed opening pairs with the next closing, as the pattern paired them.
  assert tool_response_body(context + tool_response("newest")) == (
      "<tool_response>\n" * 20_000 + "newest")


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(st.lists(st.sampled_from(["<tool_response>\n", "\n</tool_response>", "x", "\n",
                                            "<tool_response>", "</tool_response>"]))
                  .map("".join))
def test_tool_response_body_pairs_tags_as_the_lazy_pattern_does(text):
  matches = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text, re.DOTALL)
  assert tool_response_body(text) == (matches[-1] if matches else None)
