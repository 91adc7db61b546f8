"""One config section -> the dataclass (or function) of the step it configures.

Entry points keep every option in the ml_collections section of the step it belongs to
(`config.loss` -> `rl.LossConfig`, `config.sampler` -> `SamplerConfig`, ...) and build the
object here, never field by field, so a new option needs only its field and its config line.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
  """A config section that its step cannot take; entry points end the run with its one line."""


def _accepted(target: Callable[..., Any]) -> list[str] | None:
  """The keyword names `target` takes; None when it takes any (**kwargs: it checks them)."""
  if dataclasses.is_dataclass(target):
    return [f.name for f in dataclasses.fields(target) if f.init]
  parameters = inspect.signature(target).parameters.values()
  if any(p.kind == p.VAR_KEYWORD for p in parameters):
    return None
  return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def from_section(target: Callable[..., T], section: Mapping[str, Any] | None, name: str,
                 **overrides: Any) -> T:
  """`target(**section, **overrides)`, refusing keys `target` does not take.

  Args:
    target: a dataclass or a function with keyword arguments.
    section: the config section (an ml_collections ConfigDict or a dict); None is empty.
    name: how errors name the section, e.g. 'config.loss'.
    overrides: values decided elsewhere (derived from other sections); they win.

  Raises:
    ConfigError: the section has a key that `target` does not take (usually a typo), or
      `target` refused the values.
  """
  values = dict(section.items()) if section is not None else {}
  values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items()}
  accepted = _accepted(target)
  unknown = sorted(set(values) - set(accepted or values))
  if unknown:
    raise ConfigError(f"{name} has {unknown}, which {getattr(target, '__name__', target)} does "
                     f"not take; expected keys among {accepted}")
  try:
    return target(**{**values, **overrides})
  except (TypeError, ValueError) as e:
    raise ConfigError(f"{name}: {e}") from None
