"""The project's one ChatML tool format, rendered straight to token ids.

Demonstrations, RL rollouts and evaluation all go through `ChatRenderer`, so a conversation
rendered here has exactly the ids the agent loop builds turn by turn. Each message is
`<|im_start|>{role}\\n{content}<|im_end|>\\n`; tool results are user messages wrapped in
`<tool_response>`; tool schemas sit in the system message. A model's own chat template is
never used (SmolLM2's drops tools).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

from memex_jax.memory.accounting import TextTokenizer

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
ROLES = ("system", "user", "assistant", "tool")
_RESPONSE_OPEN, _RESPONSE_CLOSE = "<tool_response>\n", "\n</tool_response>"


@dataclasses.dataclass(frozen=True)
class Message:
  """One chat message.

  Attributes:
    role: system, user, assistant, or tool (a tool's result, shown to the model as user).
    content: the text; for assistant turns of a rollout, the decoded sampled ids.
  """

  role: str
  content: str

  def __post_init__(self):
    if self.role not in ROLES:
      raise ValueError(f"Message.role must be one of {ROLES}, got {self.role!r}")


@dataclasses.dataclass(frozen=True)
class RenderedIds:
  """Token ids of a conversation.

  Attributes:
    ids: [T] token ids.
    loss_mask: [T] 1 on assistant content and its closing <|im_end|>, else 0.
  """

  ids: list[int]
  loss_mask: list[int]


def tool_response(content: str) -> str:
  return f"{_RESPONSE_OPEN}{content}{_RESPONSE_CLOSE}"


def tool_response_body(text: str) -> str | None:
  """The content of the last `tool_response` in `text` (None if it has none): what a scripted
  policy reading its context as text got back from its latest tool call.

  Each opening pairs with the first closing after it, scanning forward (linear in `text`: a
  lazy pattern retried at every unclosed opening was quadratic).
  """
  last, at = None, 0
  while (start := text.find(_RESPONSE_OPEN, at)) != -1:
    end = text.find(_RESPONSE_CLOSE, start + len(_RESPONSE_OPEN))
    if end == -1:
      break
    last, at = (start + len(_RESPONSE_OPEN), end), end + len(_RESPONSE_CLOSE)
  return None if last is None else text[last[0]:last[1]]


def tools_block(schemas: Sequence[dict[str, Any]]) -> str:
  """The tool schemas as they appear in the system message, one JSON object per line."""
  lines = [json.dumps({"type": "function", "function": schema}, ensure_ascii=False)
           for schema in schemas]
  return "<tools>\n" + "\n".join(lines) + "\n</tools>"


class ChatRenderer:
  """Renders messages to ids, piece by piece, exactly as the agent loop appends them."""

  def __init__(self, tokenizer: TextTokenizer, assistant_prefix: str = ""):
    """`assistant_prefix` is text forced at the start of every assistant turn (after the header),
    e.g. '<tool_call>' to steer an untrained model into the tool format; it is context (mask 0),
    not sampled, and is part of the turn's text for parsing."""
    self.tokenizer = tokenizer
    self.assistant_prefix = assistant_prefix
    self._prefix_ids = tokenizer.encode(assistant_prefix) if assistant_prefix else []
    self.end_id = self._special_id(IM_END)
    self.start_id = self._special_id(IM_START)
    self.newline_ids = tokenizer.encode("\n")
    self._headers = {role: tokenizer.encode(f"{IM_START}{self._chat_role(role)}\n")
                     for role in ROLES}

  def _special_id(self, token: str) -> int:
    ids = self.tokenizer.encode(token)
    if len(ids) != 1:
      raise ValueError(f"the tokenizer encodes {token!r} as {ids}, not one special token: the "
                       "ChatML tool format needs a ChatML tokenizer")
    return ids[0]

  @staticmethod
  def _chat_role(role: str) -> str:
    return "user" if role == "tool" else role

  def header_ids(self, role: str) -> list[int]:
    return list(self._headers[role])

  def generation_prompt_ids(self) -> list[int]:
    """What precedes a sampled assistant turn: the header and the forced prefix."""
    return self.header_ids("assistant") + self._prefix_ids

  @staticmethod
  def content_text(message: Message) -> str:
    return tool_response(message.content) if message.role == "tool" else message.content

  def content_ids(self, message: Message) -> list[int]:
    """Assistant content includes its closing <|im_end|> (the model samples it)."""
    ids = self.tokenizer.encode(self.content_text(message))
    return ids + [self.end_id] if message.role == "assistant" else ids

  def assistant_text(self, sampled_ids: Sequence[int]) -> str:
    """A sampled turn as message text: its ids decoded, without the closing <|im_end|>."""
    ids = list(sampled_ids)
    return self.assistant_prefix + self.tokenizer.decode(
        ids[:-1] if ids and ids[-1] == self.end_id else ids)

  def closing_ids(self, sampled_ids: Sequence[int]) -> list[int]:
    """Appended after a sampled turn: <|im_end|> if the turn was cut short, then a newline."""
    ended = bool(sampled_ids) and sampled_ids[-1] == self.end_id
    return ([] if ended else [self.end_id]) + list(self.newline_ids)

  def message_ids(self, message: Message) -> list[int]:
    """A non-assistant message: header, content, <|im_end|>, newline."""
    if message.role == "assistant":
      raise ValueError("assistant messages are rendered by `render` or come from the sampler")
    return (self.header_ids(message.role) + self.content_ids(message) + [self.end_id] +
            list(self.newline_ids))

  def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
    """A conversation followed by the generation prompt: the context a sampled reply continues."""
    return self.render(messages).ids + self.generation_prompt_ids()

  def render(self, messages: Sequence[Message]) -> RenderedIds:
    """A whole conversation (e.g. a demonstration) with its loss mask."""
    ids: list[int] = []
    mask: list[int] = []
    for message in messages:
      if message.role == "assistant":
        body = Message("assistant", message.content.removeprefix(self.assistant_prefix))
        content = self.content_ids(body)
        closing = self.closing_ids(content)
        header = self.generation_prompt_ids()
        ids += header + content + closing
        mask += [0] * len(header) + [1] * len(content) + [0] * len(closing)
      else:
        piece = self.message_ids(message)
        ids += piece
        mask += [0] * len(piece)
    return RenderedIds(ids, mask)
