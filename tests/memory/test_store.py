"""ExperienceStore: validated, stable indices; reads name what exists; export is whole."""

import pytest

from memex_jax.memory import ExperienceStore, ExperienceStoreError, index_error


def test_write_read_and_export_keep_order_and_content():
  store = ExperienceStore()
  store.write("room_ids", "kitchen 1, drawer 3", "ids seen by look", step=2)
  store.write("code-A", "QXR-4821")
  assert store.read("room_ids") == "kitchen 1, drawer 3"
  assert store.indices() == ["room_ids", "code-A"]
  assert "code-A" in store and len(store) == 2
  assert store.export() == {
      "room_ids": {"content": "kitchen 1, drawer 3", "description": "ids seen by look",
                   "step": 2},
      "code-A": {"content": "QXR-4821", "description": "", "step": -1}}


@pytest.mark.parametrize("index", ["", "has space", "x" * 65, "naïve", "a/b", 7, None])
def test_bad_index_is_rejected(index):
  store = ExperienceStore()
  with pytest.raises(ExperienceStoreError, match="index"):
    store.write(index, "content")
  assert len(store) == 0
  assert index_error(index) is not None


def test_longest_valid_index_is_accepted():
  assert index_error("A_-9" * 16) is None


def test_rewriting_an_index_is_an_error_and_keeps_the_original():
  store = ExperienceStore()
  store.write("note", "first")
  with pytest.raises(ExperienceStoreError, match="'note' already exists"):
    store.write("note", "second")
  assert store.read("note") == "first"


def test_unknown_index_lists_the_available_ones():
  store = ExperienceStore()
  with pytest.raises(ExperienceStoreError, match=r"nothing has been archived"):
    store.read("missing")
  store.write("alpha", "1")
  store.write("beta", "2")
  with pytest.raises(ExperienceStoreError, match=r"unknown index 'gamma'; available indices: "
                     r"alpha, beta"):
    store.read("gamma")


def test_free_index_is_the_first_unused_numbered_index():
  store = ExperienceStore()
  assert store.free_index() == "notes_1"
  store.write("notes_1", "a")
  store.write("notes_3", "c")
  assert store.free_index() == "notes_2" and store.free_index("room") == "room_1"
  store.write("notes_2", "b")
  assert store.free_index() == "notes_4"
