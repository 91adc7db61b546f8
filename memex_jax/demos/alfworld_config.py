"""How ALFWorld demonstrations are played: the settings `alfworld_expert.Demonstrator` reads."""

from __future__ import annotations

import dataclasses

from memex_jax.agent import AgentConfig
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.demos.search_prior import SearchPrior
from memex_jax.envs.alfworld.env import AlfWorldConfig, memex_harder


@dataclasses.dataclass(frozen=True)
class DemonstrationConfig:
  """How demonstrations are played.

  Attributes:
    agent: the agent loop's settings (the SmolLM2 preset by default).
    env: the ALFWorld wrapper's options (Memex harder by default).
    prior: where object types are found, estimated from the training games only
      (`search_prior.estimate`); the expert searches the likeliest receptacles first. None:
      every receptacle is as likely (a random search order).
    slip_rate: the chance, at each environment action after a go, open, take or move, that
      the expert first repeats that command (refused by the engine) and then recovers.
    wrong_take_rate: the chance, at each decision to search on for a thing to take (hands
      empty), that the expert first takes its kind from the place that lacks it (refused by the
      engine) and then recovers.
    wrong_next_rate: the chance, at each go that follows a written search order to its next
      place, that the expert first goes to the place it is at (refused) and then recovers.
    plan_steps: whether the expert writes its task plan (the walkthrough's steps by types:
      "Task plan: find and take a cloth > go to the sinkbasin > clean the cloth with the
      sinkbasin > ...") at its first step, again in every CompressExperience summary, and opens
      each later step's first turn by looking it up there ("Step: find and take a cloth > go to
      the sinkbasin."); the ids come from the listing, or a read of it once compressed. Without
      it the turn after a fetch says only "The next step of my plan is at sinkbasin 1": the
      twentieth proof run's policy, left to infer the step from the task's words, went to the
      task's last receptacle (cleaning skipped), to a sinkbasin for a heat task, and moved a
      thing it had already put down.
    found_weight: how many times the tokens of a turn that takes what a search just found weigh
      in the SFT loss (`Demonstrator.found`). Such turns are one in four of a search's
      decisions; the thirteenth proof run's policy said "no <kind>" at 4 of the 7 places whose
      restated list held it.
    plan_weight: how many times the tokens of the turn that first writes the task plan (with
      `plan_steps`) weigh in the SFT loss. The plan is written once per demonstration; the
      twenty-first proof run's policy wrote the expert's plan for 35 of its own 128 train games
      (none of the cool or pick-two ones) after less than one epoch.
    restate_task: whether the turn that writes the plan (with `plan_steps`) first copies the
      task's words ("Task: cool some bowl and put it in microwave. Task plan: ..."). Teacher
      forced on its own demonstrations, the twenty-second proof run's policy gave " fridge" after
      a cool task's "go to the" 0.13-0.21 and preferred the microwave or the sink, and " >" after
      a pick-two plan's first move 0.12-0.23: the plan did not follow the task message ~300
      tokens back. Copied, the task's verb and count sit just before the plan.
    restate_location: whether every action turn (and every summary) also says where the expert
      is, after what it holds ("Holding: nothing. At: drawer 3."; "At: the middle of the
      room." before its first go): the place of the engine's last "You arrive at" reply, so a
      take's "from" can copy it. 103 of the twenty-first proof run's 149 refused takes named a
      place other than the one it had last gone to (as after a read that said where the thing
      was), and 100 of the 149 repeated the take just refused.
    decision_weight: the weight of the one token that decides, after a searched place's
      contents and the sought kind are restated, whether the kind is there (":" of "...: cloth:
      none." or " " of "...: cloth 1 is the ..."; `weighted_decisions`). Teacher forced on
      demonstrations of new training games, the sixteenth proof run's policy (which decided
      first, "...: no cloth.") copied 99% of the restated tokens and said " no" at 23 of 27
      places that held the kind (`launch.decision_probe`).
  """

  agent: AgentConfig = dataclasses.field(default_factory=smollm2_alfworld)
  env: AlfWorldConfig = dataclasses.field(default_factory=memex_harder)
  prior: SearchPrior | None = None
  slip_rate: float = 0.0
  wrong_take_rate: float = 0.0
  wrong_next_rate: float = 0.0
  plan_steps: bool = False
  found_weight: int = 1
  plan_weight: int = 1
  restate_task: bool = False
  restate_location: bool = False
  decision_weight: int = 1

  def __post_init__(self):
    for name in ("slip_rate", "wrong_take_rate", "wrong_next_rate"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise ValueError(f"{name}={getattr(self, name)} must be in [0, 1)")
    for name in ("found_weight", "plan_weight", "decision_weight"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
