"""VaultEnv: a small deterministic world whose key fact appears early and is needed late.

The agent starts in an entrance hall with a note that gives the vault's code; the note crumbles
once read. A corridor of rooms, each with a long description, leads east to the vault, which
opens only to the right code (a wrong code locks it for good). An agent that compresses its
context must archive the code, or it has nothing to enter at the end.
"""

from __future__ import annotations

import dataclasses
import random
import string
from typing import Any

COMMANDS = "look, read note, go east, go west, enter <code>"
_ADJECTIVES = ("dusty", "narrow", "echoing", "damp", "gilded", "cracked", "silent", "cold",
               "faded", "vaulted", "cramped", "tiled")
_THINGS = ("ledgers", "brass lamps", "oak benches", "portraits of bankers", "iron grilles",
           "empty safes", "stacks of receipts", "marble columns", "velvet ropes", "clocks")


@dataclasses.dataclass(frozen=True)
class VaultTask:
  """One vault world.

  Attributes:
    seed: fixes the code and the room descriptions.
    corridor_length: rooms between the entrance hall and the vault room.
    sentences_per_room: length of each room's description (how fast the context grows).
  """

  seed: int
  corridor_length: int = 4
  sentences_per_room: int = 3

  def __post_init__(self):
    if self.corridor_length < 1 or self.sentences_per_room < 1:
      raise ValueError(f"VaultTask needs corridor_length >= 1 and sentences_per_room >= 1, "
                       f"got {self.corridor_length} and {self.sentences_per_room}")


def vault_code(seed: int) -> str:
  """The code of the vault of `seed`, e.g. 'QXR-4821'."""
  rng = random.Random(f"code-{seed}")
  return "".join(rng.choices(string.ascii_uppercase, k=3)) + "-" + "".join(
      rng.choices(string.digits, k=4))


class VaultEnv:
  """The Env protocol over one vault world at a time."""

  def __init__(self) -> None:
    self._task: VaultTask | None = None
    self._rooms: list[str] = []
    self._position = 0
    self._note_intact = True
    self._over = False
    self._last_changed = False

  def _describe_rooms(self, task: VaultTask) -> list[str]:
    rng = random.Random(f"rooms-{task.seed}")
    last = task.corridor_length + 1
    rooms = []
    for room in range(last + 1):
      name = ("the entrance hall" if room == 0 else "the vault room" if room == last else
              f"corridor room {room}")
      sentences = [f"The {rng.choice(_ADJECTIVES)} walls of {name} are lined with "
                   f"{rng.choice(_THINGS)}." for _ in range(task.sentences_per_room)]
      exits = ["west"] * (room > 0) + ["east"] * (room < last)
      rooms.append(f"You are in {name}. " + " ".join(sentences) +
                   f" Exits: {', '.join(exits)}.")
    rooms[0] += " A folded note lies on a table."
    rooms[last] += " A steel vault door with a keypad fills the east wall."
    return rooms

  def reset(self, task: Any) -> tuple[str, str]:
    if not isinstance(task, VaultTask):
      raise TypeError(f"VaultEnv.reset takes a VaultTask, got {type(task).__name__}")
    self._task, self._rooms = task, self._describe_rooms(task)
    self._position, self._note_intact, self._over, self._last_changed = 0, True, False, False
    task_text = ("Open the vault at the east end of the corridor by entering its code with "
                 f"`enter <code>`. Commands: {COMMANDS}.")
    return task_text, self._rooms[0]

  def step(self, command: str) -> tuple[str, bool, bool, dict[str, Any]]:
    if self._task is None:
      raise RuntimeError("VaultEnv.step called before reset")
    observation, won, changed = self._act(" ".join(str(command).lower().split()))
    self._last_changed = changed
    return observation, self._over, won, {"changed_state": changed}

  def changes_state(self, command: str) -> bool:
    del command  # The answer is about the most recent step.
    return self._last_changed

  def _act(self, command: str) -> tuple[str, bool, bool]:
    """(observation, won, changed_state) of one normalised command."""
    last = len(self._rooms) - 1
    if self._over:
      return "The episode is over.", False, False
    if command == "look":
      return self._rooms[self._position], False, False
    if command == "read note":
      if self._position != 0 or not self._note_intact:
        return "There is no note here.", False, False
      self._note_intact = False
      return (f"The note reads: 'Vault code: {vault_code(self._task.seed)}. Burn after "
              "reading.' The paper crumbles to dust in your hands."), False, True
    if command in ("go east", "go west"):
      target = self._position + (1 if command == "go east" else -1)
      if not 0 <= target <= last:
        return f"You cannot {command} from here.", False, False
      self._position = target
      return self._rooms[target], False, True
    if command.startswith("enter "):
      if self._position != last:
        return "There is no vault here.", False, False
      self._over = True
      if command.removeprefix("enter ").strip().upper() == vault_code(self._task.seed):
        return "The keypad beeps and the vault swings open. Task complete.", True, True
      return "The keypad buzzes: wrong code. The vault locks for good.", False, True
    return f"Unknown command {command!r}. Commands: {COMMANDS}.", False, False
