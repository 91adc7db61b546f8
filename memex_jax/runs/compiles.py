"""How many XLA compiles this process ran and how long they took (tracing, lowering and the
backend's compile), from `jax.monitoring`'s duration events.

A sampler compiles once per new shape (rows, prompt bucket, slots): on a 2-core CPU each costs
seconds, so a run's decode and prefill times only mean something beside this count.
"""

from __future__ import annotations

import dataclasses

import jax

# The three stages of one compile that `jax.monitoring` times; the backend's marks one compile.
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_BACKEND = "/jax/core/compile/backend_compile_duration"


@dataclasses.dataclass
class CompileTotals:
  """Compiles since `watch()` was first called in this process.

  Attributes:
    compiles: backend compiles (a persistent-cache hit is not one).
    trace_s: seconds tracing Python into jaxprs.
    lower_s: seconds lowering jaxprs to MLIR.
    backend_s: seconds in XLA's compiler.
  """

  compiles: int = 0
  trace_s: float = 0.0
  lower_s: float = 0.0
  backend_s: float = 0.0

  @property
  def seconds(self) -> float:
    return self.trace_s + self.lower_s + self.backend_s


_totals: CompileTotals | None = None


def _on_duration(event: str, duration: float, **_) -> None:
  if event == _BACKEND:
    _totals.compiles += 1
    _totals.backend_s += duration
  elif event == _TRACE:
    _totals.trace_s += duration
  elif event == _LOWER:
    _totals.lower_s += duration


def watch() -> CompileTotals:
  """Starts counting (once per process; later calls return the same totals) and returns the
  live totals."""
  global _totals
  if _totals is None:
    _totals = CompileTotals()
    jax.monitoring.register_event_duration_secs_listener(_on_duration)
  return _totals
