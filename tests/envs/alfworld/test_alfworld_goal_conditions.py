"""Partial credit read off PDDL goals: conditions counted under the best binding."""

import pytest

from memex_jax.envs.alfworld.goal_conditions import GoalConditions, parse_goal

HEAT = """(define (problem p) (:objects)
  (:goal (and (exists (?r - receptacle) (exists (?o - object)
    (and (heatable ?o) (objectType ?o MugType) (receptacleType ?r CabinetType)
         (isHot ?o)  ; heated
         (inReceptacle ?o ?r))))))))"""
TWO = """(:goal (and (exists (?r # receptacle) (exists (?o1 # object)
  (and (objectType ?o1 CdType) (receptacleType ?r DrawerType) (inReceptacle ?o1 ?r)
       (exists (?o2 # object) (and (not (= ?o1 ?o2)) (objectType ?o2 CdType)
                                   (inReceptacle ?o2 ?r))))))))"""
LIGHT = """(:goal (and (exists (?ot - object ?r - receptacle ?a - agent ?l - location)
  (and (objectType ?ot DeskLampType) (toggleable ?ot) (isToggled ?ot)
       (receptacleAtLocation ?r ?l) (atLocation ?a ?l) (inReceptacle ?ot ?r)))
  (exists (?o - object ?a - agent) (and (objectType ?o BookType) (holds ?a ?o)))))"""

TYPES = {"mug1": "object", "mug2": "object", "cup1": "object", "cabinet1": "receptacle",
         "cabinet2": "receptacle", "microwave1": "receptacle", "cd1": "object", "cd2": "object",
         "drawer1": "receptacle", "lamp1": "object", "desk1": "receptacle", "book1": "object",
         "agent1": "agent", "loc1": "location", "loc2": "location"}
STATIC = {("objecttype", "mug1", "mugtype"), ("objecttype", "mug2", "mugtype"),
          ("objecttype", "cup1", "cuptype"), ("heatable", "mug1"), ("heatable", "mug2"),
          ("heatable", "cup1"), ("receptacletype", "cabinet1", "cabinettype"),
          ("receptacletype", "cabinet2", "cabinettype"), ("objecttype", "cd1", "cdtype"),
          ("objecttype", "cd2", "cdtype"), ("receptacletype", "drawer1", "drawertype"),
          ("objecttype", "lamp1", "desklamptype"), ("toggleable", "lamp1"),
          ("inreceptacle", "lamp1", "desk1"), ("receptacleatlocation", "desk1", "loc2"),
          ("objecttype", "book1", "booktype"), ("pickupable", "book1"), ("pickupable", "mug1"),
          ("pickupable", "mug2"), ("pickupable", "cd1"), ("pickupable", "cd2")}


def _share(goal, *facts):
  return GoalConditions(parse_goal(goal)).share_met(STATIC | set(facts), TYPES)


def test_a_heated_mug_elsewhere_meets_one_of_two_conditions():
  assert _share(HEAT) == 0.0
  assert _share(HEAT, ("inreceptacle", "mug1", "cabinet1")) == 0.5  # placed, not hot
  assert _share(HEAT, ("ishot", "mug2"), ("inreceptacle", "mug1", "cabinet1")) == 0.5
  assert _share(HEAT, ("ishot", "cup1"), ("inreceptacle", "cup1", "cabinet1")) == 0.0  # a cup
  assert _share(HEAT, ("ishot", "mug2"), ("inreceptacle", "mug2", "cabinet2")) == 1.0
  assert _share(HEAT, ("ishot", "mug1"), ("inreceptacle", "mug1", "microwave1")) == 0.5


def test_two_objects_are_two_conditions_and_one_object_cannot_fill_both():
  assert _share(TWO, ("inreceptacle", "cd1", "drawer1")) == 0.5
  assert _share(TWO, ("inreceptacle", "cd1", "drawer1"), ("inreceptacle", "cd2", "drawer1")) == 1.0


def test_a_lamp_that_never_moves_is_no_condition():
  assert _share(LIGHT) == 0.0
  assert _share(LIGHT, ("holds", "agent1", "book1")) == pytest.approx(1 / 3)
  assert _share(LIGHT, ("holds", "agent1", "book1"), ("atlocation", "agent1", "loc2"),
                ("istoggled", "lamp1")) == 1.0
  # At the wrong place the toggled lamp still counts; being there does not.
  assert _share(LIGHT, ("atlocation", "agent1", "loc1"), ("istoggled", "lamp1")) == \
      pytest.approx(1 / 3)


def test_goals_it_cannot_score_are_refused():
  with pytest.raises(ValueError, match="no \\(:goal"):
    parse_goal("(define (problem p))")
  with pytest.raises(ValueError, match="forall"):
    parse_goal("(:goal (and (exists (?r - receptacle) (forall (?o - object) (isHot ?o)))))")
  with pytest.raises(ValueError, match="unbalanced"):
    parse_goal("(:goal (and (isHot ?o)")
