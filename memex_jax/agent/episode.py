"""One episode of Algorithm 1, advanced a turn at a time by the batched agent loop.

The context is kept as messages with their exact ids: [system, task] then the working
messages. Sampled ids go in as the policy returned them (token-in-token-out); observations are
rendered and tokenized once. A request sends the policy only the ids it has not seen, or the
whole context (reset) after a compression or a truncation.

An Episode never calls its environment: it says which command a turn calls for, and the loop
resets and steps the envs of all episodes together (`memex_jax.envs.batch`), so pooled engines
work in parallel.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from memex_jax.agent import trajectory as traj
from memex_jax.agent.chat import ChatRenderer, Message, tool_response
from memex_jax.agent.config import FULL_CONTEXT, MEMEX, AgentConfig
from memex_jax.agent.parser import ParsedTurn, ToolCall, parse_turn, text_problem
from memex_jax.agent.policy import Turn, TurnRequest
from memex_jax.agent.rewards import RedundancyTracker, StepRecord, shaped_reward
from memex_jax.envs.batch import ResetReply, StepReply
from memex_jax.memory import (COMPRESS, FINISH, MEMORY_TOOLS, ContextStatus, ContextUsage,
                              ExperienceStore, ExperienceStoreError, ToolArgumentError,
                              build_summary, plan_compression, string_argument)
from memex_jax.rl.sample import Sample

# Env text goes into the context, so the tokenizer must encode it: text that is not Unicode
# text (a lone surrogate, e.g. bytes read with errors="surrogateescape") is the env's failure.
_NOT_TEXT = "the environment's text cannot be tokenized: "


@dataclasses.dataclass(frozen=True)
class _PendingTurn:
  """A turn `take_turn` applied and `finish_turn` completes."""

  parsed: ParsedTurn
  working_text: str  # the working context before the turn (anchors must not match the turn)
  command: str | None  # the env command it calls for


@dataclasses.dataclass
class _Piece:
  """A message of the context and its ids (mask 1 / logprobs only on sampled ids)."""

  message: Message
  ids: list[int]
  mask: list[int]
  logprobs: list[float]


class Episode:
  """Algorithm 1 for one task, as a state machine driven by env replies and sampled turns."""

  def __init__(self, episode_id: int, group_id: int, renderer: ChatRenderer,
               config: AgentConfig, system_prompt: str):
    self.episode_id = episode_id
    self.group_id = group_id
    self._renderer, self._config = renderer, config
    self._system_prompt = system_prompt
    self._tool_names = [s["name"] for s in config.tool_schemas()]
    self.store = ExperienceStore()
    self._tracker = RedundancyTracker()
    self._prefix: list[_Piece] = []
    self._working: list[_Piece] = []
    self._segments: list[list[_Piece]] = []
    self._seen = 0  # Context ids the policy holds.
    self._needs_reset = True
    self._reported_working = 0  # W of the latest ContextStatus: C_t of the next step.
    self.steps: list[StepRecord] = []
    self.task_text = ""
    self.finish_reason: str | None = None
    self.error = ""
    self.won = False
    self.score = 0.0  # the env's last partial credit (StepReply.score)
    self.answer: str | None = None
    self._counts = {"compress": 0, "read": 0, "truncations": 0, "generated": 0}
    self._pending: _PendingTurn | None = None

  # Context bookkeeping.

  def _piece(self, message: Message) -> _Piece:
    ids = self._renderer.message_ids(message)
    return _Piece(message, ids, [0] * len(ids), [0.0] * len(ids))

  def _context_ids(self) -> list[int]:
    return [i for piece in self._prefix + self._working for i in piece.ids]

  def _usage(self, extra: int = 0) -> ContextUsage:
    return ContextUsage(sum(len(p.ids) for p in self._prefix),
                        sum(len(p.ids) for p in self._working) + extra)

  def working_text(self) -> str:
    """The decoded working context (anchors are searched here)."""
    return "\n".join(self._renderer.content_text(p.message) for p in self._working)

  def _observe(self, text: str, from_tool: bool) -> None:
    """Appends an observation (a user message) and the ContextStatus of the context it ends.

    Args:
      text: the observation.
      from_tool: wrap it in <tool_response> (results of tool calls, not the first observation
        or a format error).
    """
    body = tool_response(text) if from_tool else text
    usage = self._usage(extra=len(self._piece(Message("user", body)).ids))
    offer = self._config.mode == MEMEX and self._config.offer_free_index
    status = ContextStatus(usage, self._config.threshold, self._config.warn_fraction,
                           self.store.free_index() if offer else "").render()
    self._reported_working = usage.working
    self._working.append(self._piece(Message("user", f"{body}\n{status}" if body else status)))

  def _close_segment(self, upto: int | None = None) -> None:
    """Records the context as a sample: the prefix and the working pieces before `upto`."""
    self._segments.append(self._prefix + self._working[:upto])

  def _end(self, reason: str, error: str = "") -> None:
    self.finish_reason, self.error = reason, error

  @property
  def done(self) -> bool:
    return self.finish_reason is not None

  # The calls the loop makes: begin, then take_turn and finish_turn each round.

  def begin(self, reset: ResetReply) -> TurnRequest | None:
    """Starts from the env's reset; returns the first request (None if the reset failed)."""
    problem = text_problem(reset.task_text) or text_problem(reset.observation)
    if reset.error or problem:  # A broken task is a scored failure, not a crash of the loop.
      self._end(traj.ENV_ERROR, f"reset failed: {reset.error or _NOT_TEXT + problem}")
      return None
    self.task_text = reset.task_text
    self._prefix = [self._piece(Message("system", self._system_prompt)),
                    self._piece(Message("user", self.task_text))]
    self._observe(reset.observation, from_tool=False)
    return self._request()

  def _truncate(self, room_needed: int) -> None:
    """Full-context regime: drop the oldest messages until a whole turn fits."""
    window = self._config.context_window
    used = self._usage().total
    overflow = used + room_needed - window
    dropped = 0
    while overflow > 0 and len(self._working) - dropped > 1:
      overflow -= len(self._working[dropped].ids)
      dropped += 1
    if dropped:
      # The latest observation opens the next segment; the closed one keeps it only if it fits
      # (an observation past the window made a sample longer than the window).
      self._close_segment(None if used <= window else -1)
      self._working = [_Piece(p.message, p.ids, [0] * len(p.ids), [0.0] * len(p.ids))
                       for p in self._working[dropped:]]
      self._needs_reset = True
      self._counts["truncations"] += 1

  def _request(self) -> TurnRequest | None:
    """Asks for the next turn after the latest observation, if one more token fits."""
    header = self._renderer.generation_prompt_ids()
    closing = len(self._renderer.closing_ids([]))  # Completes a turn cut at the window.
    if self._config.mode == FULL_CONTEXT:
      self._truncate(len(header) + self._config.max_turn_tokens + closing)
    full = self._context_ids() + header
    room = self._config.context_window - len(full) - closing
    if room < 1:
      self._working.pop()  # The observation that does not fit: no turn will ever read it.
      self._end(traj.CONTEXT_OVERFLOW)
      return None
    new_ids = full if self._needs_reset else full[self._seen:]
    request = TurnRequest(self.episode_id, tuple(new_ids), self._needs_reset,
                          min(self._config.max_turn_tokens, room))
    self._seen, self._needs_reset = len(full), False
    return request

  def take_turn(self, turn: Turn, max_new_tokens: int) -> str | None:
    """Appends a sampled turn; returns the env command it calls for, if any.

    The loop steps the envs of every episode that returned a command, then calls `finish_turn`
    on each episode of the round with its env's reply (None for the others).
    """
    if self._pending is not None:
      raise RuntimeError(f"episode {self.episode_id}: the previous turn was not finished")
    sampled = list(turn.ids)
    if len(sampled) != len(turn.logprobs) or len(sampled) > max_new_tokens:
      raise ValueError(f"episode {self.episode_id}: the policy returned {len(sampled)} ids and "
                       f"{len(turn.logprobs)} logprobs for a turn of at most {max_new_tokens}")
    working_text = self.working_text()  # Before this turn: anchors must not match it.
    header = self._renderer.generation_prompt_ids()
    closing = self._renderer.closing_ids(sampled)
    text = self._renderer.assistant_text(sampled)  # with the forced prefix: parsed as written
    self._working.append(_Piece(
        Message("assistant", text), header + sampled + closing,
        [0] * len(header) + [1] * len(sampled) + [0] * len(closing),
        [0.0] * len(header) + [float(x) for x in turn.logprobs] + [0.0] * len(closing)))
    self._seen += len(sampled)
    self._counts["generated"] += len(sampled)

    parsed = parse_turn(text)
    command = None
    if parsed.call is not None and parsed.call.name == self._config.env_tool:
      try:
        command = string_argument(parsed.call.arguments, "command", parsed.call.name)
      except ToolArgumentError:
        pass  # `finish_turn` answers with the argument error.
    self._pending = _PendingTurn(parsed, working_text, command)
    return command

  def finish_turn(self, env_reply: StepReply | None) -> TurnRequest | None:
    """Completes the turn; returns the next request, or None once the episode ended.

    Args:
      env_reply: the env's reply to the command `take_turn` returned; None when it returned none.
    """
    pending, self._pending = self._pending, None
    if pending is None:
      raise RuntimeError(f"episode {self.episode_id}: finish_turn before take_turn")
    if (pending.command is None) != (env_reply is None):
      raise ValueError(f"episode {self.episode_id}: an env reply goes with an env command, "
                       f"got command {pending.command!r} and reply {env_reply}")
    parsed = pending.parsed
    record = StepRecord(self._reported_working, malformed=parsed.malformed)
    if parsed.call is None:
      observation = Message("user", f"Format error ({parsed.error}): {parsed.detail}")
    elif parsed.call.name in MEMORY_TOOLS:
      observation, compressed = self._run_memory_tool(parsed.call, pending.working_text)
      record = dataclasses.replace(record, compressed=compressed)
    else:
      observation, changed = (self._env_result(pending.command, env_reply)
                              if env_reply is not None else self._run_tool(parsed.call))
      redundant = self._tracker.record(parsed.call.signature(), changed)
      record = dataclasses.replace(record, tool_call=True, redundant=redundant)
    if parsed.extra_calls:
      observation = dataclasses.replace(observation, content=(
          f"{observation.content}\n(Only the first tool call ran; {parsed.extra_calls} more "
          "were ignored: one call per turn.)"))
    self.steps.append(record)
    if not self.done and len(self.steps) >= self._config.max_steps:
      self._end(traj.MAX_STEPS)
    if self.done:
      return None
    self._observe(observation.content, from_tool=observation.role == "tool")
    return self._request()

  # Tools.

  def _run_memory_tool(self, call: ToolCall, working_text: str) -> tuple[Message, bool]:
    if call.name not in self._config.memory_tools:
      return Message("tool", f"Error: {call.name} is not available in this memory regime; "
                     f"available tools: {', '.join(self._tool_names)}"), False
    try:
      if call.name == COMPRESS:
        return self._compress(call.arguments, working_text), True
      content = self.store.read(string_argument(call.arguments, "index", call.name))
      self._counts["read"] += 1
      return Message("tool", content), False
    except (ToolArgumentError, ExperienceStoreError) as e:
      return Message("tool", f"Error: {e}"), False

  def _compress(self, arguments: Mapping[str, Any], working_text: str) -> Message:
    plan = plan_compression(arguments, working_text, self.store,
                            archive=self._config.mode == MEMEX)
    for block in plan.blocks:
      self.store.write(block.index, block.content, block.description, step=len(self.steps))
    summary = build_summary(self._renderer.tokenizer, plan.state, self.store,
                            self._config.summary_token_budget,
                            self._config.description_token_budget)
    self._close_segment()
    self._working, self._needs_reset = [], True
    self._counts["compress"] += 1
    content = summary.render()
    if plan.ignored_blocks:
      content += (f"\n({plan.ignored_blocks} db_blocks ignored: this memory regime archives "
                  "nothing.)")
    return Message("tool", content)

  def _run_tool(self, call: ToolCall) -> tuple[Message, bool]:
    """Finish, an env call without a valid command, or an unknown name: (observation, changed)."""
    try:
      if call.name == FINISH:
        self.answer = string_argument(call.arguments, "answer", FINISH)
        self._end(traj.FINISHED)
        return Message("tool", "Episode finished."), False
      if call.name == self._config.env_tool:  # take_turn found no valid command in it
        string_argument(call.arguments, "command", call.name)
        raise RuntimeError(f"episode {self.episode_id}: a valid env command got no env reply")
    except ToolArgumentError as e:
      return Message("tool", f"Error: {e}"), False
    return Message("tool", f"Error: unknown tool {call.name!r}; available tools: "
                   f"{', '.join(self._tool_names)}"), False

  def _env_result(self, command: str, reply: StepReply) -> tuple[Message, bool]:
    problem = text_problem(reply.observation)
    if reply.error or problem:  # The environment's failure ends this episode only.
      reason = reply.error or _NOT_TEXT + problem
      self._end(traj.ENV_ERROR, f"step({command!r}) failed: {reason}")
      return Message("tool", ""), False
    self.won = self.won or reply.won
    if reply.score is not None:
      self.score = reply.score
    if reply.done:
      self._end(traj.ENV_DONE)
    return Message("tool", reply.observation), reply.changed

  # Export.

  def trajectory(self, trajectory_id: int) -> traj.Trajectory:
    """The finished episode: segments (with at least one sampled token), store, reward."""
    if not self.done:
      raise RuntimeError(f"episode {self.episode_id} has not ended")
    closed = self._segments + ([self._prefix + self._working] if self._prefix else [])
    closed = [pieces for pieces in closed if any(m for p in pieces for m in p.mask)]
    reward = shaped_reward(1.0 if self.won else 0.0, self.steps, self._config.threshold,
                           self._config.reward_weights)
    working = [s.working_tokens for s in self.steps] or [0]
    metrics = traj.EpisodeMetrics(
        success=self.won, score=1.0 if self.won else self.score, steps=len(self.steps),
        peak_working=max(working), mean_working=float(np.mean(working)),
        total_tokens=sum(len(p.ids) for pieces in closed for p in pieces),
        generated_tokens=self._counts["generated"], num_compress=self._counts["compress"],
        num_read=self._counts["read"], num_truncations=self._counts["truncations"],
        num_segments=len(closed), num_redundant=reward.num_redundant,
        num_malformed=reward.num_malformed, num_tool_calls=reward.num_tool_calls,
        p_context=reward.context, p_redundancy=reward.redundancy, p_format=reward.format,
        reward=reward.total, finish_reason=self.finish_reason)
    segments = tuple(
        traj.Segment(messages=tuple(p.message for p in pieces), sample=Sample(
            token_ids=np.asarray([i for p in pieces for i in p.ids], np.int32),
            loss_mask=np.asarray([m for p in pieces for m in p.mask], np.int32),
            rollout_logprobs=np.asarray([x for p in pieces for x in p.logprobs], np.float32),
            trajectory_id=trajectory_id, group_id=self.group_id, reward=reward.total,
            index=index))
        for index, pieces in enumerate(closed))
    return traj.Trajectory(trajectory_id, self.group_id, self.task_text, segments,
                           self.store.export(), self.answer, reward, metrics, self.error)
