"""ContextStatus: exact line, approaching and over-threshold warnings, parsed back."""

from memex_jax.memory import ContextStatus, ContextUsage, parse_status


def test_line_reports_working_total_and_threshold():
  status = ContextStatus(ContextUsage(fixed=900, working=100), threshold=1000)
  assert status.render() == "[Context Status: working=100, total=1000, threshold=1000]"


def test_warns_when_approaching_the_threshold():
  status = ContextStatus(ContextUsage(fixed=900, working=800), threshold=1000)
  assert status.approaching and not status.over
  assert "80% of the threshold" in status.render()
  below = ContextStatus(ContextUsage(fixed=900, working=799), threshold=1000)
  assert "\n" not in below.render()


def test_warns_when_over_the_threshold():
  status = ContextStatus(ContextUsage(fixed=10, working=1001), threshold=1000)
  assert status.over and not status.approaching
  assert "[Warning: working > threshold." in status.render()
  assert ContextStatus(ContextUsage(10, 1000), threshold=1000).approaching


def test_warn_fraction_is_configurable():
  assert ContextStatus(ContextUsage(0, 500), threshold=1000, warn_fraction=0.5).approaching
  assert not ContextStatus(ContextUsage(0, 500), threshold=1000).approaching


def test_parse_status_reads_back_the_last_rendered_line():
  over = ContextStatus(ContextUsage(fixed=10, working=1001), threshold=1000)
  below = ContextStatus(ContextUsage(fixed=900, working=100), threshold=1000)
  assert parse_status(over.render()) == over and parse_status(over.render()).over
  assert parse_status(
      f"<tool_response>\nYou see a door.\n</tool_response>\n{below.render()}") == below
  assert parse_status(f"{over.render()}\nobservation\n{below.render()}") == below
  assert parse_status("[Context Status: working=100]") is None


def test_an_over_threshold_status_offers_its_free_index_and_parses_it_back():
  over = ContextStatus(ContextUsage(10, 1001), threshold=1000, free_index="notes_3")
  assert "new indices (free index: notes_3) and keep" in over.render()
  assert parse_status(f"obs\n{over.render()}") == over
  below = ContextStatus(ContextUsage(10, 999), threshold=1000, free_index="notes_3")
  assert "free index" not in below.render()
  assert parse_status(below.render()).free_index == ""
  # Only the warning right after the last status line counts, not text that follows it.
  assert parse_status(f"{below.render()}\n(free index: notes_9)").free_index == ""
