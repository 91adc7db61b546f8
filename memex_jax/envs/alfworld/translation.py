"""Memoised PDDL -> SAS translation for ALFWorld's engine.

TextWorld's PddlEnv translates the game's PDDL with fast-downward twice on `load` and twice more
on every `reset` (a plain and an optimised encoding), and the translation is most of the cost of
starting an episode (seconds for ALFRED-sized scenes). The translation is a pure function of
(domain, problem, optimize), so the results are kept for the last few games. fast-downward's
translator also overwrites `sys.argv`; the wrapper puts it back.
"""

from __future__ import annotations

import collections
import hashlib
import sys
import threading

import fast_downward

MAX_GAMES = 4  # Each game keeps two translations (plain and optimised).

_original = fast_downward.pddl2sas
_cache: collections.OrderedDict[tuple[str, bool], tuple] = collections.OrderedDict()
_lock = threading.Lock()


def _key(domain: str, problem: str, optimize: bool) -> tuple[str, bool]:
  digest = hashlib.sha256(domain.encode() + b"\0" + problem.encode()).hexdigest()
  return digest, bool(optimize)


def cached_pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: bool = False):
  """Same results as `fast_downward.pddl2sas`, computed once per recent (domain, problem)."""
  key = _key(domain, problem, optimize)
  with _lock:
    if key in _cache:
      _cache.move_to_end(key)
      return _cache[key]
    argv = list(sys.argv)
    try:
      result = _original(domain, problem, verbose=verbose, optimize=optimize)
    finally:
      sys.argv = argv
    _cache[key] = result
    while len(_cache) > 2 * MAX_GAMES:
      _cache.popitem(last=False)
    return result


def install() -> None:
  """Routes the engine's translations through the cache (idempotent, process-wide)."""
  fast_downward.pddl2sas = cached_pddl2sas


def cache_size() -> int:
  return len(_cache)
