"""Memoised grammar parses for TextWorld-PDDL's text generation (ALFWorld steps ~3x faster).

TextWorld renders each observation and every admissible command by deriving text from the
game's grammar, and each derivation parses strings with tatsu: the command template of every
applicable action on every step, the rule conditions it checks, the intro on every reset. These
are the same few hundred strings again and again, and parsing them was ~60% of an ALFWorld step
(and part of a reset) under cProfile. Both parses are pure functions of their text:

- `Rule.parse_conjunctive_query(expr)` gives a Rule that derivation only reads (it is matched
  against the state), so one Rule per text is shared;
- `textgen._parse_and_convert(text, ...)` gives Symbols that derivation then mutates (each gets
  its context), so the parsed Symbols are kept and every call gets a deep copy.

Measured with `python -m bench.alfworld_env` (one engine, random admissible commands, this
2-core machine): a step took 57.9 -> 14.7 ms on small scenes and 325 -> 92 ms on ALFRED-sized
ones; a reset of a new game 537 -> 331 ms and 3.8 -> 3.2 s (the rest is fast-downward
translating the game's PDDL, which translation.py keeps for the last few games). The
observations are identical: tests/envs/alfworld/test_alfworld_grammar_cache.py plays a game with
and without the caches.
"""

from __future__ import annotations

import copy
import functools

from textworld import logic
from textworld.envs.pddl import textgen

CACHE_SIZE = 4096  # distinct texts kept per parse; a game uses a few hundred

_original_query = logic.Rule.parse_conjunctive_query.__func__
_original_symbols = textgen._parse_and_convert  # pylint: disable=protected-access


@functools.lru_cache(maxsize=CACHE_SIZE)
def _query(cls: type, expr: str) -> logic.Rule:
  return _original_query(cls, expr)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _symbols(text: str, rule_name: str | None, trace: bool):
  return _original_symbols(text, rule_name=rule_name, trace=trace)


def cached_symbols(text: str, rule_name: str | None = None, trace: bool = False):
  """`textgen._parse_and_convert`, parsed once per (text, rule); a fresh copy every call."""
  return copy.deepcopy(_symbols(text, rule_name, trace))


def install() -> None:
  """Routes TextWorld's two grammar parses through the caches (idempotent, process-wide)."""
  logic.Rule.parse_conjunctive_query = classmethod(_query)
  textgen._parse_and_convert = cached_symbols  # pylint: disable=protected-access
