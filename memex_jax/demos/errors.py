"""How a demonstration fails."""


class DemonstrationError(RuntimeError):
  """The expert solution could not be played or did not win (names the game or task)."""
