"""What an agent is told about ALFWorld, and how ALFWorld names things (no engine import)."""

import re

INSTRUCTIONS = (
    "You act in a household. The execute tool runs one text command: look (once per "
    "episode; it lists the room's receptacles), go to R, open R, close R, take O from R, "
    "move O to R, examine X, use LAMP, heat O with R, cool O with R, clean O with R, "
    "inventory. Name every object and receptacle by its exact id, like \"drawer 1\". The "
    "episode ends when the task is done.")
THING_ID = re.compile(r"\b[a-z]+ \d+\b")  # An object or receptacle id, like "drawer 1".
