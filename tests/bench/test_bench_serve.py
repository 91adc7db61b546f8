"""bench.serve runs the server and the local sampler on real SmolLM2, tiny sizes."""

import json

import pytest

from bench import serve


def test_questions_are_distinct():
  assert len(set(serve.questions(20))) == 20


@pytest.mark.slow
def test_rows_per_client_count(tmp_path, monkeypatch):
  out = tmp_path / "serve.json"
  monkeypatch.setattr("sys.argv", ["serve", "--clients", "1,2", "--requests_per_client", "1",
                                   "--max_tokens", "2", "--num_slots", "2", "--cache_length",
                                   "128", "--out", str(out)])
  serve.main()
  record = json.loads(out.read_text())
  rows = record["rows"]
  assert [(r["clients"], r["requests"], r["local_batch"]) for r in rows] == [(1, 1, 1), (2, 2, 2)]
  for row in rows:
    assert row["server_tokens_per_s"] > 0 and row["local_tokens_per_s"] > 0
    assert row["server_over_local"] == pytest.approx(
        row["server_tokens_per_s"] / row["local_tokens_per_s"])
  assert record["sampler"] == {"num_slots": 2, "cache_length": 128}
