"""The scripted expert searches as a policy could: likeliest unsearched places first, no
revisits, and it takes the first thing of the kind it needs as soon as it sees it."""

import dataclasses
import re

import pytest

from memex_jax import demos
from memex_jax.agent import parse_turn, tool_response_body
from memex_jax.agent.presets import smollm2_alfworld
from memex_jax.demos.alfworld_text import (DECISION, FETCH, NEXT_LOOKUP, SEARCH_ON,
                                          STEP_LOOKUP, WRITTEN_ORDER, WRITTEN_PLAN, abstract,
                                          kind_of, mentions, seen_items)
from memex_jax.envs.alfworld.env import LISTING
from memex_jax.memory import COMPRESS
from memex_jax.rl.sample import trained_runs


def _executed(trajectory):
  """(command, observation) of every environment action, in order."""
  pairs = []
  for segment in trajectory.segments:
    working = segment.messages[2:]
    for message, reply in zip(working, working[1:]):
      call = parse_turn(message.content).call if message.role == "assistant" else None
      if call and call.name == "execute":
        pairs.append((call.arguments["command"], tool_response_body(reply.content) or ""))
  return pairs


def _turns_and_trained(trajectory, renderer):
  """(message, its segment's trained text) of every working message, over the episode."""
  turns = []
  for segment in trajectory.segments:
    ids, mask = segment.sample.token_ids, segment.sample.loss_mask
    trained = renderer.tokenizer.decode(ids[mask > 0].tolist())
    turns += [(m, trained) for m in segment.messages[2:]]
  return turns


def _search(executed):
  """The receptacles whose contents were shown before the first take, and the take."""
  first_take = next(i for i, (c, _) in enumerate(executed) if c.startswith("take "))
  searched = [(c.split(" ", 1)[1].removeprefix("to "), seen_items(obs))
              for c, obs in executed[:first_take]
              if c.split(" ")[0] in ("go", "open", "examine") and "you see" in obs]
  return searched, executed[first_take][0]


def test_the_expert_wins_every_small_game(played):
  assert len(played) >= 8
  for game, seed, trajectory in played:
    m = trajectory.metrics
    assert m.success and m.finish_reason == "env_done", (game, seed)
    assert m.num_malformed == 0 and m.p_redundancy == 0, (game, seed)
    opened = [c for c, _ in _executed(trajectory) if c.startswith("open ")]
    assert len(opened) == len(set(opened)), (game, seed)  # nothing is opened twice


def _rank(search_prior, kind, receptacles):
  """The expert's search order as a sort key: likeliest first (a type's chance, shared among the
  room's receptacles of that type), ties in the listing's order so an order copies from it."""
  def key(r):
    same = sum(kind_of(x) == kind_of(r) for x in receptacles)
    return -search_prior.probability(kind, kind_of(r)) / same, receptacles.index(r)
  return key


def test_the_search_visits_likeliest_first_never_twice_and_stops_at_the_first_sight(
    played, search_prior):
  empty = 0
  for game, seed, trajectory in played:
    executed = _executed(trajectory)
    listing = next(obs for c, obs in executed if c == "look")
    receptacles = seen_items(listing[listing.index(LISTING):])
    searched, take = _search(executed)
    kind = take.split(" ")[1]
    places = [r for r, _ in searched]
    assert len(places) == len(set(places)), (game, seed, places)  # never a revisit

    for n, place in enumerate(places):  # each visit: the likeliest place not searched yet,
      unsearched = [r for r in receptacles if r not in places[:n]]  # first listed among ties
      assert place == min(unsearched, key=_rank(search_prior, kind, receptacles)), (game, place)
    # The search stops where it first sees the kind, and takes it from there at once.
    holds = [any(kind_of(i) == kind for i in items) for _, items in searched]
    assert holds[-1] and not any(holds[:-1]), (game, seed, searched)
    assert take.endswith(f"from {places[-1]}")
    empty += len(places) > 1
  assert empty > 0  # some demonstration shows places found empty before the thing


_HOLDING = re.compile(r"Holding: (nothing|[a-z]+ \d+)\. ")
_PICKED_UP = re.compile(r"You pick up the ([a-z]+ \d+) from")


def test_a_visit_is_restated_before_the_search_decides(played):
  """The turn after a search's visit copies what the place holds, then takes the kind it needs
  from that list, or names the kind as missing and searches on."""
  took = searched_on = 0
  for game, seed, trajectory in played:
    for segment in trajectory.segments:
      working = segment.messages[2:]
      for before, reply, message in zip(working, working[1:], working[2:]):
        holding = message.role == "assistant" and _HOLDING.match(message.content)
        match = holding and DECISION.match(message.content, holding.end())
        if not match:
          continue
        visit = parse_turn(before.content).call.arguments["command"]
        items = seen_items(tool_response_body(reply.content) or "")
        assert visit.endswith(match[1]), (game, seed, message.content)
        assert match[2] == (", ".join(items) or "nothing"), (game, seed, message.content)
        command = parse_turn(message.content).call.arguments["command"]
        if match[4] == SEARCH_ON:  # none of the kind here: the search goes on elsewhere
          assert all(kind_of(i) != match[3] for i in items), (game, seed, message.content)
          assert command.startswith("go to ") and not command.endswith(match[1])
          searched_on += 1
        else:  # the kind is here: it is taken from the list just restated
          thing = match[3] + match[4]
          assert thing in items and command == f"take {thing} from {match[1]}", (game, seed)
          took += 1
  assert took >= len(played) // 2 and searched_on > 0


TIGHT_THRESHOLD = 512
_SUMMARY_ORDER = re.compile(r"search for a ([a-z]+) in the order ([a-z0-9 >]+)[,.]")


@pytest.fixture(scope="module")
def played_tight(play_small_games, demonstration_config):
  """Every small game at seed 0 under a threshold low enough to compress in the middle of
  searches: [(game, seed, demonstration)]."""
  config = dataclasses.replace(demonstration_config,
                               agent=smollm2_alfworld(threshold=TIGHT_THRESHOLD))
  return [(game, 0, trajectory) for game, trajectory in play_small_games(config)]


def test_a_search_writes_its_order_then_follows_it_place_after_place(played, played_tight,
                                                                     search_prior):
  """A search's first go names the unsearched places likeliest first and goes to the first; each
  next go names the place just searched and the one after it in an order its context shows; a
  compression's plan names the order left, and the search goes on from its head."""
  fresh = following = resumed = 0
  for game, seed, trajectory in played + played_tight:
    executed = _executed(trajectory)
    listing = next(obs for c, obs in executed if c == "look")
    receptacles = seen_items(listing[listing.index(LISTING):])
    searched, summary_order = [], None  # (kind, places) of the last compression's plan
    for segment in trajectory.segments:
      working = segment.messages[2:]
      for at, message in enumerate(working):
        call = parse_turn(message.content).call if message.role == "assistant" else None
        if call and call.name == COMPRESS:  # a segment's last turn
          plan = _SUMMARY_ORDER.search(call.arguments["summary"])
          summary_order = plan and (plan[1], plan[2].split(" > "))
        if not call or call.name != "execute":
          continue
        command = call.arguments["command"]
        order, step = WRITTEN_ORDER.search(message.content), NEXT_LOOKUP.search(message.content)
        if order:
          kind, places = order[1], order[2].split(" > ")
          assert command == f"go to {places[0]}", (game, command)
          assert f"{order[2]}. I go to {places[0]} first." in message.content, (game, command)
          assert not set(places) & set(searched), (game, places)
          assert places == sorted(places, key=_rank(search_prior, kind, receptacles)), places
          if summary_order and summary_order[0] == kind:  # no place searched since the plan
            assert places == summary_order[1], (game, places, summary_order)
            resumed += 1
          fresh += 1
        elif step:
          assert command == f"go to {step[2]}" and step[1] == searched[-1], (game, command)
          shown = "\n".join(m.content for m in working[:at])
          assert mentions(shown, f"{step[1]} > {step[2]}"), (game, command)
          following += 1
        if (command.split(" ")[0] in ("go", "open", "examine") and
            "you see" in working[at + 1].content):
          searched.append(command.split(" ", 1)[1].removeprefix("to "))
          summary_order = None
  assert fresh > 0 and following > 0 and resumed > 0, (fresh, following, resumed)


def test_a_turn_restates_only_what_the_observation_before_it_listed(played):
  """No restatement from memory: after a compression the context no longer shows the place's
  contents, and a policy cannot copy them."""
  restated = 0
  for game, seed, trajectory in played:
    for segment in trajectory.segments:
      working = segment.messages[2:]
      for before, message in zip(working, working[1:]):
        match = message.role == "assistant" and DECISION.search(message.content)
        if not match:
          continue
        items = seen_items(tool_response_body(before.content) or "")
        assert match[2] == (", ".join(items) or "nothing"), (game, seed, message.content)
        restated += 1
  assert restated > 0


def test_each_action_turn_opens_with_what_the_engine_says_is_held(played):
  """"Holding: X." is the thing of the engine's last 'You pick up', until a move puts it down:
  the line a policy's summaries and moves can copy."""
  for game, seed, trajectory in played:
    held, turns = "nothing", 0
    for segment in trajectory.segments:
      working = segment.messages[2:]
      for message, reply in zip(working, working[1:] + working[-1:]):
        call = parse_turn(message.content).call if message.role == "assistant" else None
        if not call or call.name != "execute":
          continue
        holding = _HOLDING.match(message.content)
        assert holding and holding[1] == held, (game, seed, held, message.content)
        turns += 1
        observation = tool_response_body(reply.content) or ""
        picked = _PICKED_UP.match(observation)
        held = picked[1] if picked else "nothing" if observation.startswith("You move") else held
    m = trajectory.metrics
    assert turns == m.steps - m.num_compress - m.num_read, (game, seed)


_AT = re.compile(r"Holding: (?:nothing|[a-z]+ \d+)\. At: (the middle of the room|[a-z]+ \d+)\.")


def test_with_restate_location_each_turn_says_where_the_last_go_arrived_and_takes_from_there(
    play_small_games, demonstration_config):
  """"At: R." after "Holding:" is the place of the engine's last "You arrive at" (or of an
  examine from a shared spot), in every action turn and summary, and each take is from it."""
  config = dataclasses.replace(demonstration_config, restate_location=True)
  takes = summaries = 0
  for game, trajectory in play_small_games(config):
    assert trajectory.metrics.success, game
    at = "the middle of the room"
    for segment in trajectory.segments:
      working = segment.messages[2:]
      for message, reply in zip(working, working[1:] + working[-1:]):
        call = parse_turn(message.content).call if message.role == "assistant" else None
        if call and call.name == COMPRESS:
          said, summaries = _AT.search(call.arguments["summary"]), summaries + 1
          assert said and said[1] == at, (game, at, call.arguments["summary"])
        if not call or call.name != "execute":
          continue
        said = _AT.match(message.content)
        assert said and said[1] == at, (game, at, message.content)
        command = call.arguments["command"]
        if command.startswith("take "):
          takes += 1
          assert command.endswith(f" from {at}"), (game, command)
        observation = tool_response_body(reply.content) or ""
        if observation.startswith("You arrive at ") or command.startswith("examine "):
          at = command.split(" ", 1)[1].removeprefix("to ")
  assert takes >= 4 and summaries >= 2, (takes, summaries)


def test_wrong_takes_are_refused_left_out_of_the_loss_and_the_search_goes_on_empty_handed(
    played_with_wrong_takes, renderer):
  """A wrong take names the sought kind at a place just restated without it; the engine refuses
  it, and the next action still holds nothing, says why, and searches elsewhere (trained on). A
  compression between them leaves the place's contents unrestated: the context no longer shows
  them."""
  wrong = 0
  for game, trajectory in played_with_wrong_takes:
    assert trajectory.metrics.success, game
    turns = _turns_and_trained(trajectory, renderer)
    for at, ((turn, trained), (reply, _)) in enumerate(zip(turns, turns[1:])):
      call = turn.role == "assistant" and parse_turn(turn.content).call
      restated = call and DECISION.search(turn.content)
      if (not restated or restated[4] == SEARCH_ON or
          not call.arguments["command"].startswith("take ")):
        continue
      thing = call.arguments["command"].split(" from ")[0][5:]
      if thing in restated[2].split(", "):
        continue
      # A wrong take: refused, not trained on.
      assert (tool_response_body(reply.content) or "").startswith("Nothing happens")
      assert turn.content.split("<tool_call>")[0] not in trained, (game, turn.content)
      later = [(m, t) for m, t in turns[at + 2:] if m.role == "assistant"]
      compressed = parse_turn(later[0][0].content).call.name == COMPRESS
      after, after_trained = next((m, t) for m, t in later
                                  if parse_turn(m.content).call.name == "execute")
      kind = kind_of(thing)
      said = f"Holding: nothing. Nothing happened: {restated[1]} holds no {kind}."
      if not compressed:
        said += f" {restated[1]} has {restated[2]}: {kind}{SEARCH_ON}."
      assert after.content.startswith(said), (game, after.content)  # the hands still empty
      assert after.content.split("<tool_call>")[0] in after_trained
      assert parse_turn(after.content).call.arguments["command"].startswith("go to ")
      wrong += 1
  assert wrong >= 2


def _turn_weights(trajectory):
  """(assistant turn, its weight in the loss) over an episode's segments; every trained token of
  a turn weighs the same."""
  weighed = []
  for segment in trajectory.segments:
    mask, runs = segment.sample.loss_mask, trained_runs(segment.sample.loss_mask)
    turns = [m.content for m in segment.messages if m.role == "assistant"]
    weights = [int(mask[run].max()) for run in runs]
    assert [int(mask[run].min()) for run in runs] == weights
    assert len(weights) == len(turns)
    weighed += zip(turns, weights)
  return weighed


def test_found_turns_weigh_found_weight_in_the_loss(play_small_games, demonstration_config):
  weighed = 0
  for game, trajectory in play_small_games(
      dataclasses.replace(demonstration_config, found_weight=3)):
    for turn, weight in _turn_weights(trajectory):  # the take of what a search just found, only
      holding = _HOLDING.match(turn)
      restated = holding and DECISION.search(turn, holding.end())  # after "From <index>: "
      assert weight == (3 if restated and restated[4] != SEARCH_ON else 1), (game, turn)
      weighed += weight == 3
  assert weighed >= 2


def test_the_turn_that_first_writes_the_plan_weighs_plan_weight(play_small_games,
                                                               demonstration_config):
  config = dataclasses.replace(demonstration_config, plan_steps=True, plan_weight=3)
  for game, trajectory in play_small_games(config):
    weighed = [turn for turn, weight in _turn_weights(trajectory) if weight == 3]
    assert len(weighed) == 1, game  # one turn: the first step's; the summaries repeat it at 1
    assert WRITTEN_PLAN.search(weighed[0]) and parse_turn(weighed[0]).call.name != COMPRESS


def test_stats_count_the_empty_places_before_the_first_sight(played):
  for _, _, trajectory in played:
    searched, _ = _search(_executed(trajectory))
    assert demos.demonstration_stats(trajectory)["empty_searches"] == len(searched) - 1


def test_notes_are_numbered_by_compression_under_the_index_the_status_offers(played):
  numbered = 0
  for game, seed, trajectory in played:
    for number, segment in enumerate(trajectory.segments, 1):
      working = segment.messages[2:]
      for before, message in zip(working, working[1:]):
        call = parse_turn(message.content).call if message.role == "assistant" else None
        if call and call.name == "CompressExperience":
          notes = [b["index"] for b in call.arguments["db_blocks"] if b["index"] != "room_listing"]
          assert notes == [f"notes_{number}"], (game, seed, notes)
          assert f"(free index: notes_{number})" in before.content, (game, seed)
          numbered += 1
  assert numbered >= 1  # the small games compress rarely (twice in all when written)


def test_slips_are_refused_then_noted_and_left_out_of_the_loss(
    play_small_games, renderer, demonstration_config):
  slipped = 0
  for game, trajectory in play_small_games(dataclasses.replace(demonstration_config,
                                                               slip_rate=0.5)):
    assert trajectory.metrics.success, game
    executed = _executed(trajectory)
    repeats = [n for n in range(1, len(executed)) if executed[n][0] == executed[n - 1][0]]
    for n in repeats:  # refused; the next action (the winning one has no stored reply) differs
      assert executed[n][1].startswith("Nothing happens"), (game, executed[n])
      assert n + 1 == len(executed) or executed[n + 1][0] != executed[n][0]
    assert demos.demonstration_stats(trajectory)["refused"] >= len(repeats)
    for segment in trajectory.segments:
      ids, mask = segment.sample.token_ids, segment.sample.loss_mask
      context = renderer.tokenizer.decode(ids.tolist())
      trained = renderer.tokenizer.decode(ids[mask > 0].tolist())
      turns = [m.content for m in segment.messages if m.role == "assistant"]
      slips = [t for t in turns if t.startswith("Next: ")]
      for turn in slips:  # in the context, not in the loss
        assert turn in context and turn not in trained, (game, turn)
      for turn in turns:
        if turn not in slips:  # every other turn is trained on
          assert turn.split("<tool_call>")[0] in trained, (game, turn)
      slipped += len(slips)
      # Each slip is followed by a turn that notes the refusal (or compresses first).
      for turn, after in zip(turns, turns[1:]):
        if turn in slips:
          holding = _HOLDING.match(after)
          assert (holding and after.startswith("Nothing happened: ", holding.end()) or
                  "CompressExperience" in after)
  assert slipped >= 2


def test_a_wrong_next_goes_where_it_is_then_the_right_lookup_follows(played_with_wrong_nexts,
                                                                     renderer):
  """"Next: X > X." goes to the place the search is at: refused and not trained on; the next
  action notes it and looks up the place after X in the order (trained on)."""
  wrong = 0
  for game, trajectory in played_with_wrong_nexts:
    assert trajectory.metrics.success, game
    turns = _turns_and_trained(trajectory, renderer)
    for at, ((turn, trained), (reply, _)) in enumerate(zip(turns, turns[1:])):
      step = turn.role == "assistant" and NEXT_LOOKUP.search(turn.content)
      if not step or step[1] != step[2]:
        continue
      place = step[1]
      assert parse_turn(turn.content).call.arguments["command"] == f"go to {place}"
      assert (tool_response_body(reply.content) or "").startswith("Nothing happens"), game
      assert turn.content.split("<tool_call>")[0] not in trained, (game, turn.content)
      after, after_trained = next((m, t) for m, t in turns[at + 2:] if m.role == "assistant")
      if parse_turn(after.content).call.name == COMPRESS:
        continue
      holding = _HOLDING.match(after.content)
      assert after.content.startswith(f"Nothing happened: I am at {place} already. ",
                                      holding.end()), (game, after.content)
      right = NEXT_LOOKUP.search(after.content)
      assert right[1] == place != right[2], (game, after.content)
      assert parse_turn(after.content).call.arguments["command"] == f"go to {right[2]}"
      assert after.content.split("<tool_call>")[0] in after_trained
      wrong += 1
  assert wrong >= 2




def test_a_written_plan_is_looked_up_at_each_next_step(play_small_games, demonstration_config,
                                                       played, renderer):
  """With plan_steps the first step's turn writes the plan, every summary repeats it, and each
  later step's first turn looks it up ("Step: A > B.", A > B consecutive in it; a "do" step's
  command is B with the thing it holds); the lookups are trained on. Without, no plan."""
  assert not any("Task plan:" in m.content for _, _, t in played for s in t.segments
                 for m in s.messages)
  config = dataclasses.replace(demonstration_config, plan_steps=True)
  looked_up = compressed = 0
  for game, trajectory in play_small_games(config):
    assert trajectory.metrics.success, game
    turns = [(m, t) for m, t in _turns_and_trained(trajectory, renderer) if m.role == "assistant"]
    plans = [WRITTEN_PLAN.search(m.content) for m, _ in turns]
    written = next(p[1] for p in plans if p)
    assert all(p[1] == written for p in plans if p), game
    compressions = [p for (m, _), p in zip(turns, plans)
                    if parse_turn(m.content).call.name == COMPRESS]
    assert all(compressions), game  # every summary repeats it
    compressed += len(compressions)
    steps = written.split(" > ")
    lookups = [(m, t, s.groups()) for m, t in turns if (s := STEP_LOOKUP.search(m.content))]
    assert len(lookups) >= len(steps) - 2, (game, written)  # a "do" step may be done already
    at = 0
    for message, trained, (before, after) in lookups:
      assert f"{before} > {after}" in written, (game, message.content)
      assert message.content.split("<tool_call>")[0] in trained, game
      command = parse_turn(message.content).call.arguments["command"]
      if not after.startswith(FETCH):  # "clean the cloth with the sinkbasin"
        assert abstract(command) == after, (game, message.content)
      assert after in steps[at + 1:], (game, after, steps[at + 1:])  # in the plan's order
      at = steps.index(after, at + 1)
    looked_up += len(lookups)
  assert looked_up >= 8 and compressed >= 2, (looked_up, compressed)


def test_the_plan_can_follow_the_task_copied(play_small_games, demonstration_config):
  config = dataclasses.replace(demonstration_config, plan_steps=True, restate_task=True)
  for game, trajectory in play_small_games(config):
    assert trajectory.metrics.success, game
    turns = [m.content for s in trajectory.segments for m in s.messages if m.role == "assistant"]
    restating = [turn for turn in turns if "Task: " in turn]
    assert len(restating) == 1, game  # the first step's turn; the summaries repeat only the plan
    task = trajectory.task_text.strip().rstrip(".")
    assert f"Task: {task}. Task plan: " in restating[0], (game, restating[0])
    assert restating[0] == next(turn for turn in turns if WRITTEN_PLAN.search(turn))
