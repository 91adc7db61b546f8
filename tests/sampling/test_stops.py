"""Stop strings complete on the right token however the text was tokenised."""

import jax.numpy as jnp
import numpy as np

from memex_jax.sampling import stops


def _run(table, token_strings, ids):
  window = stops.empty_window(table, 1)
  hits = []
  for i in ids:
    window, hit = stops.push_and_match(table, window, jnp.asarray([i], jnp.int32))
    hits.append(bool(hit[0]))
  return hits


def test_stop_string_split_across_tokens():
  vocab = ["a", "</", "tool", "_call", ">", "</tool_call>\n", "x", "<|im_end|>"]
  table = stops.build_stop_table(vocab, ["</tool_call>", "<|im_end|>"], eos_ids=[])
  # "a</tool_call>" spelled over five tokens stops on the last of them.
  assert _run(table, vocab, [0, 1, 2, 3, 4, 6]) == [False, False, False, False, True, False]
  # One token that contains the stop followed by more text stops at once.
  assert _run(table, vocab, [0, 5]) == [False, True]
  assert _run(table, vocab, [6, 7]) == [False, True]
  assert _run(table, vocab, [1, 2, 6, 3, 4]) == [False] * 5


def test_eos_id_stops_and_window_keeps_recent_bytes(smollm2_tokenizer):
  tok = smollm2_tokenizer
  strings = [tok.decode([i]) for i in range(tok.vocab_size)]
  table = stops.build_stop_table(strings, ["</tool_call>"], eos_ids=[tok.eos_id])
  text = "Let me look." + " filler" * 20 + ' <tool_call>{"name": "go"}</tool_call> tail'
  ids = tok.encode(text)
  hits = _run(table, strings, ids)
  first = hits.index(True)
  assert tok.decode(ids[:first + 1]).endswith("</tool_call>")
  assert not tok.decode(ids[:first]).endswith("</tool_call>")
  assert _run(table, strings, [tok.encode("hi")[0], tok.eos_id]) == [False, True]
  np.testing.assert_array_equal(table.eos_ids, [tok.eos_id])
