"""IndexedSummary: progress state cut to its token budget, index map of the whole store."""

from memex_jax.memory import ExperienceStore, IndexedSummary, build_summary
from memex_jax.memory.accounting import TRUNCATION_MARK


def test_state_is_truncated_to_the_budget(smollm2_tokenizer):
  state = "Explored rooms 1 to 9; the drawer is open. " * 40
  summary = build_summary(smollm2_tokenizer, state, ExperienceStore(), state_budget=30,
                          description_budget=8)
  assert summary.truncated
  kept = summary.state.removesuffix(TRUNCATION_MARK)
  assert smollm2_tokenizer.count(kept) <= 30
  assert state.startswith(kept)


def test_short_state_and_index_map_render_in_archive_order(smollm2_tokenizer):
  store = ExperienceStore()
  store.write("look_output", "...", "room ids from the one allowed look")
  store.write("code", "QXR-4821", "vault code " + "very " * 50 + "long")
  summary = build_summary(smollm2_tokenizer, "Next: go east twice.", store, state_budget=300,
                          description_budget=8)
  assert not summary.truncated
  assert [index for index, _ in summary.index_map] == ["look_output", "code"]
  assert summary.index_map[0][1] == "room ids from the one allowed look"
  assert summary.index_map[1][1].endswith(TRUNCATION_MARK)
  text = summary.render()
  assert text.index("Next: go east twice.") < text.index("- look_output: room ids") < \
      text.index("- code: vault code")


def test_empty_map_says_so():
  assert "Index map: (empty)" in IndexedSummary("state", ()).render()
