"""The retrieval copilot: a small LLM policy that reads a task and emits `<search>R:W</search>`.

ExpHarness §3.3 and Tables 7-11: the copilot sees the task with its family's controller
template, may reason in `<think>...</think>`, then gives R (restart/locality) and W
(similarity-utility trade-off), integers on 0..100 (retrieval turns them into rho = R / 100 and
lambda = W / 100 with the graph's clamps). A reply without a readable tag falls back to
R = W = `CopilotConfig.fallback_control` and is counted; its tokens still train (their reward
teaches the policy that a missing tag does not pay).

Each decision is one `rl.Sample` (prompt untrained, reply trained), so the copilot learns with
the PPO learner in rl/ (which knows no copilot).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import numpy as np

from memex_jax.agent.chat import ChatRenderer, Message
from memex_jax.harness import prompts
from memex_jax.rl.sample import Sample
from memex_jax.sampling import completions
from memex_jax.sampling.sampler import Sampler

STOP = "</search>"
_SEARCH = re.compile(r"<search>\s*(\d{1,3})\s*:\s*(\d{1,3})\s*</search>")

_CONTROLS = """R (0-100): Restart/locality control. Low R allows broader graph diffusion; high R keeps retrieval closer to the semantic seeds.
W (0-100): Similarity-utility trade-off. Low W favors semantic similarity; high W gives more weight to historical utility.
When W=0, ranking uses only similarity within the graph-derived candidate set.
You may explain your retrieval choice briefly in <think>...</think> tags.
Output the retrieval parameters as <search>R:W</search>.
Do not solve the task or output its final answer or implementation."""
_STATIC_SYSTEM = "You are a retrieval strategy controller for a frozen task-solving model."
_STATIC_TASK = {prompts.QA: "Question: {task}", prompts.MATH: "Problem: {task}",
                prompts.CODE: "Task: {task}"}
_ALFWORLD = """You are a retrieval strategy controller for an embodied agent in the ALFRED household environment.
Task: {task}
You control how experiences are retrieved from a knowledge graph by setting two parameters:
R (0-100): Restart/locality control for graph diffusion.
Low R (0-30): Explore widely through connected experiences in the graph (broad discovery).
High R (70-100): Stay close to the most similar experiences (precise, local search).
W (0-100): Selection preference between semantic similarity and historical utility.
Low W (0-30): Prefer candidates most similar to this task.
High W (70-100): Give greater weight to historical shared-reward estimates.
When W=0, candidates are ranked only by cosine similarity within the graph-derived candidate set. Increase W to incorporate historical feedback.
Output format: <search>R:W</search>
You may reason briefly in <think>...</think> tags first.
Examples:
- New/unfamiliar task type -> <search>20:10</search>
- Common task with good past data -> <search>80:70</search>
- Moderate confidence -> <search>50:40</search>
Output the complete retrieval-control tag. Do not output an environment action or a task answer."""
# The example tags of the ALFWorld template, offered to the static prompts too
# (CopilotConfig.static_examples): without them SmolLM2-135M copies "R:W" literally.
_EXAMPLES = _ALFWORLD[_ALFWORLD.index("Examples:"):_ALFWORLD.index("\nOutput the complete")]


@dataclasses.dataclass(frozen=True)
class CopilotConfig:
  """How the copilot decides.

  Attributes:
    max_tokens: reply budget (a short think, then the tag).
    temperature: sampling temperature in training (paper: 1.0); evaluation is greedy.
    fallback_control: R and W of a reply without a readable tag (paper: 50).
    max_task_chars: the task text is cut to this many characters in the prompt (and further,
      by tokens, where the prompt would not leave `max_tokens` free in the sampler's window).
    static_examples: the static prompts also list the ALFWorld template's example tags (a
      small copilot then writes numbers; the paper's static prompts have none).
    reply_prefix: text forced at the start of every reply (context, not sampled). "<search>"
      steers a small copilot straight into the tag (SmolLM2-135M rarely writes one unprompted);
      "" leaves the reply free, <think> included, as in the paper.
  """

  max_tokens: int = 48
  temperature: float = 1.0
  fallback_control: int = 50
  max_task_chars: int = 1500
  static_examples: bool = False
  reply_prefix: str = ""


@dataclasses.dataclass(frozen=True)
class Decision:
  """One copilot reply and what retrieval reads of it.

  Attributes:
    restart: R in [0, 100].
    weight: W in [0, 100].
    parsed: the reply held a readable tag (False: the fallback was used).
    text: the reply.
    prompt_ids: the rendered prompt the copilot read.
    reply_ids: the ids it sampled.
    reply_logprobs: the sampler's logprob of each sampled id.
  """

  restart: int
  weight: int
  parsed: bool
  text: str
  prompt_ids: tuple[int, ...]
  reply_ids: tuple[int, ...]
  reply_logprobs: tuple[float, ...]

  def sample(self, trajectory_id: int, reward: float, group_id: int = 0) -> Sample:
    """The decision as a learner sample: the reply's tokens trained, the prompt's not."""
    n, m = len(self.prompt_ids), len(self.reply_ids)
    return Sample(token_ids=np.asarray(self.prompt_ids + self.reply_ids, np.int32),
                  loss_mask=np.r_[np.zeros(n, np.int32), np.ones(m, np.int32)],
                  rollout_logprobs=np.r_[np.zeros(n), self.reply_logprobs].astype(np.float32),
                  trajectory_id=trajectory_id, group_id=group_id, reward=float(reward))


def copilot_messages(task_text: str, family: str, config: CopilotConfig) -> list[Message]:
  """The controller prompt of one task (Table 7 for ALFWorld, Tables 9-11 for static)."""
  task = task_text[:config.max_task_chars]
  if family == prompts.ALFWORLD:
    return [Message("user", _ALFWORLD.format(task=task))]
  if family not in _STATIC_TASK:
    raise ValueError(f"no copilot prompt for family {family!r}")
  controls = _CONTROLS + ("\n" + _EXAMPLES if config.static_examples else "")
  return [Message("system", _STATIC_SYSTEM),
          Message("user", _STATIC_TASK[family].format(task=task) + "\n" + controls)]


def parse_controls(text: str, fallback: int = 50) -> tuple[int, int, bool]:
  """(R, W, parsed) from the last `<search>R:W</search>` of a reply (after any think).

  A tag whose numbers exceed 100 is clamped to 100; no tag gives (fallback, fallback, False).
  """
  found = _SEARCH.findall(text)
  if not found:
    return fallback, fallback, False
  restart, weight = (min(int(x), 100) for x in found[-1])
  return restart, weight, True


class Copilot:
  """The copilot policy decoding on its own sampler.

  Attributes:
    sampler: the copilot's sampler (its params are the policy being trained); its stop strings
      must include STOP.
    renderer: ChatML rendering over the copilot's tokenizer.
    config: decoding and fallback settings.
  """

  def __init__(self, sampler: Sampler, config: CopilotConfig = CopilotConfig()):
    if STOP not in sampler.config.stop_strings:
      raise ValueError(f"the copilot's sampler must stop on {STOP!r}; its stop strings are "
                       f"{sampler.config.stop_strings}")
    self.sampler, self.config = sampler, config
    self.renderer = ChatRenderer(sampler.tokenizer, assistant_prefix=config.reply_prefix)

  def _prompt_ids(self, task_text: str, family: str) -> list[int]:
    """The prompt, its task text cut (from the end, by tokens) until the prompt leaves the reply
    budget free in the sampler's window: `max_task_chars` bounds characters, and a long
    question of the whole MMLU suite came to 532 tokens against a 512-slot window.

    Raises:
      ValueError: (one line) the prompt without any task text leaves no room for a reply.
    """
    room = self.sampler.config.cache_length - self.config.max_tokens
    tokenizer = self.sampler.tokenizer
    ids = self.renderer.prompt_ids(copilot_messages(task_text, family, self.config))
    while len(ids) > room and task_text:
      task_ids = tokenizer.encode(task_text)
      # A few ids more than the excess: decoding a cut and encoding it again can join ids.
      task_text = tokenizer.decode(task_ids[:max(0, len(task_ids) - (len(ids) - room) - 4)])
      ids = self.renderer.prompt_ids(copilot_messages(task_text, family, self.config))
    if len(ids) > room:
      raise ValueError(f"the copilot's {family} prompt takes {len(ids)} of the sampler's "
                       f"{self.sampler.config.cache_length} slots without a task, leaving no "
                       f"room for {self.config.max_tokens} reply tokens")
    return ids

  def decide(self, task_texts: Sequence[str], families: Sequence[str],
             greedy: bool = False) -> list[Decision]:
    """One decision per task: sampled at the config's temperature, or greedy (evaluation)."""
    prompt_ids = [self._prompt_ids(t, f) for t, f in zip(task_texts, families)]
    turns = completions.complete(self.sampler, prompt_ids,
                                 [self.config.max_tokens] * len(prompt_ids),
                                 temperature=0.0 if greedy else self.config.temperature)
    decisions = []
    for ids, turn in zip(prompt_ids, turns):
      text = self.renderer.assistant_text(turn.ids)
      restart, weight, parsed = parse_controls(text, self.config.fallback_control)
      decisions.append(Decision(restart, weight, parsed, text, tuple(ids), tuple(turn.ids),
                                tuple(turn.logprobs)))
    return decisions
