"""Scenes and tasks of `alfworld-synth`: what a generated ALFWorld-format game contains.

`alfworld-synth` is ALFWorld's engine, PDDL domain, text grammar and goal library played on games
generated here — NOT ALFWorld's data (the 3553 / 140 / 134 games of json_2.1.1, which come from
ALFRED's recorded AI2-THOR trajectories). What comes from the `alfworld` wheel:

- the room: one of the 120 AI2-THOR floor plans (`gen/layouts/FloorPlanN-objects.json`: the
  object and receptacle types that scene really has; `FloorPlanN-openable.json`: its receptacle
  instances with their real ids and the agent pose in front of each; `FloorPlanN-layout.npy`:
  its reachable floor points);
- which receptacle type may hold which object type (`gen/constants.py` VAL_RECEPTACLE_OBJECTS),
  which objects are cleanable / heatable / coolable / sliceable (VAL_ACTION_OBJECTS), which
  receptacles open (OPENABLE_CLASS_LIST), which task types a room type allows (GOALS_VALID),
  the train / test scene numbers (TRAIN_SCENE_NUMBERS / TEST_SCENE_NUMBERS);
- goals and task sentences (`gen/goal_library.py`).

What is synthetic (sampled from the seed): where each object lies (a receptacle of a type that may
hold it), how many instances of each object type there are (1-3, as ALFRED's generator's
MAX_NUM_OF_OBJ_INSTANCES), the agent's start pose, the task parameters, and the instances of the
receptacle types a scene's objects.json lists but its openable.json lacks (CoffeeMachine,
Toaster, GarbageCan, StoveBurner, ...: ids and poses made up from reachable points). Lamps (not
in any receptacle table) stand on a table-like receptacle of the room.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import lru_cache

from resrl.tasks.alfworld.engine import layouts_dir

# ALFWorld's six task types: short name -> ALFRED task_type (alfred_tw_env.TASK_TYPES)
TASK_TYPES = {
    "pick": "pick_and_place_simple",
    "look": "look_at_obj_in_light",
    "clean": "pick_clean_then_place_in_recep",
    "heat": "pick_heat_then_place_in_recep",
    "cool": "pick_cool_then_place_in_recep",
    "pick2": "pick_two_obj_and_place",
}
SHORT_NAME = {v: k for k, v in TASK_TYPES.items()}
# ALFWorld's train split per task type (json_2.1.1/train, 3553 games; Shridhar et al. 2021, Table 1):
# the proportions the generated set follows in every split
TRAIN_COUNTS = {"pick": 790, "look": 308, "clean": 650, "heat": 459, "cool": 533, "pick2": 813}
ROOM_TYPES = {"Kitchen": range(1, 31), "LivingRoom": range(201, 231), "Bedroom": range(301, 331),
              "Bathroom": range(401, 431)}
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_HOLDERS = ("SideTable", "Desk", "Dresser", "DiningTable", "CoffeeTable", "Shelf", "TVStand", "CounterTop")
# the appliance a state-change task needs, and which it must not use as the goal receptacle
APPLIANCE = {"clean": "SinkBasin", "heat": "Microwave", "cool": "Fridge"}
ACTION_SET = {"clean": "Cleanable", "heat": "Heatable", "cool": "Coolable"}


def _constants():
    import alfworld.gen.constants as constants  # a plain module of tables (no side effects)

    return constants


def room_type(scene: int) -> str:
    return next(name for name, r in ROOM_TYPES.items() if scene in r)


def split_scenes(split: str) -> list[int]:
    """ALFRED's scene split (gen/constants.py): train and valid_seen on the train scenes,
    valid_unseen on the test scenes."""
    c = _constants()
    if split in ("train", "valid_seen"):
        return sorted(c.TRAIN_SCENE_NUMBERS)
    if split == "valid_unseen":
        return sorted(c.TEST_SCENE_NUMBERS)
    raise ValueError(f"unknown split {split!r}")


def mangle(name: str) -> str:
    """An AI2-THOR id as a PDDL name, the way ALFRED's generator writes it (fix_pddl_str_chars)."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(a, b)
    return name


def id_type(object_id: str) -> str:
    """'Cabinet|+00.68|+00.50|-02.20' -> 'Cabinet'; 'Sink|...|SinkBasin' -> 'SinkBasin'."""
    parts = object_id.split("|")
    return parts[-1] if parts[-1].endswith("Basin") else parts[0]


def pose_location(pose) -> str:
    """An agent pose [x, z, rotation, horizon] as ALFRED's location name loc|x/0.25|z/0.25|rot/90|horizon."""
    x, z, rot, horizon = pose
    return f"loc|{int(round(x / 0.25))}|{int(round(z / 0.25))}|{int(rot) // 90 % 4}|{int(horizon)}"


@lru_cache(maxsize=None)
def scene_tables(scene: int) -> tuple[tuple[str, ...], dict, tuple]:
    """(object types, {receptacle id: pose}, reachable points) of a real floor plan."""
    import numpy as np

    d = layouts_dir()
    types = tuple(json.loads((d / f"FloorPlan{scene}-objects.json").read_text()))
    receptacles = json.loads((d / f"FloorPlan{scene}-openable.json").read_text())
    points = tuple(tuple(float(v) for v in p) for p in np.load(d / f"FloorPlan{scene}-layout.npy"))
    return types, receptacles, points


@dataclass
class Scene:
    """One sampled room: receptacle instances (id -> location), object instances (id -> receptacle id)."""

    number: int
    receptacles: dict[str, str] = field(default_factory=dict)  # id -> location name
    objects: dict[str, str] = field(default_factory=dict)      # id -> receptacle id
    agent_location: str = ""

    def types_of(self, ids) -> set[str]:
        return {id_type(i) for i in ids}


def _coord(rng: random.Random) -> str:
    return f"{rng.uniform(-4, 4):+06.2f}"


def sample_scene(scene: int, rng: random.Random) -> Scene:
    """Receptacles from the floor plan, objects placed where the tables allow (see the module docstring)."""
    c = _constants()
    types, openable, points = scene_tables(scene)
    out = Scene(number=scene)
    for rid in sorted(openable):
        if id_type(rid) in c.RECEPTACLES and id_type(rid) not in c.MOVABLE_RECEPTACLES_SET:
            out.receptacles[rid] = pose_location(openable[rid])
    have = out.types_of(out.receptacles)
    for kind in types:  # receptacle types the scene has but openable.json lacks: made-up instances
        if kind in c.RECEPTACLES and kind not in c.MOVABLE_RECEPTACLES_SET and kind not in have:
            for _ in range(rng.randint(2, 4) if kind == "StoveBurner" else 1):
                x, z = rng.choice(points)
                prefix = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}.get(kind, kind)
                suffix = f"|{kind}" if kind.endswith("Basin") else ""
                rid = f"{prefix}|{x:+06.2f}|{_coord(rng)}|{z:+06.2f}{suffix}"
                out.receptacles[rid] = pose_location((x, z, 90 * rng.randrange(4), 30))
            have.add(kind)
    holders = {r: sorted(k for k, v in c.VAL_RECEPTACLE_OBJECTS.items() if r in v) for r in types}
    for kind in sorted(set(types)):
        if kind in LAMPS:
            places = [r for r in sorted(out.receptacles) if id_type(r) in LAMP_HOLDERS]
        elif kind in c.OBJECTS_SET and kind not in c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET \
                and not kind.endswith("Sliced"):
            places = [r for r in sorted(out.receptacles) if id_type(r) in holders.get(kind, ())]
        else:
            continue
        if not places:
            continue
        for _ in range(1 if kind in LAMPS else rng.randint(1, 3)):
            oid = f"{kind}|{_coord(rng)}|{_coord(rng)}|{_coord(rng)}"
            out.objects[oid] = rng.choice(places)
    x, z = rng.choice(points)
    out.agent_location = pose_location((x, z, 90 * rng.randrange(4), 30))
    return out


@dataclass
class Task:
    kind: str          # short name (pick, look, clean, heat, cool, pick2)
    obj: str           # object type
    recep: str = ""    # goal receptacle type ("" for look)
    toggle: str = ""   # lamp type (look only)


def sample_task(kind: str, scene: Scene, rng: random.Random) -> Task | None:
    """A task of this kind the scene can pose, the scene adjusted so that the goal does not hold at
    the start (no target object starts in a goal receptacle; pick2 gets at least two targets); None
    when the scene has no such task."""
    c = _constants()
    placed = sorted(scene.types_of(scene.objects) - set(LAMPS))
    recep_types = sorted(scene.types_of(scene.receptacles))
    if kind == "look":
        lamps = sorted(scene.types_of(scene.objects) & set(LAMPS))
        pickable = [o for o in placed if o not in ("Box", "Pan", "Pot")]  # things one looks at under a lamp
        if not lamps or not pickable:
            return None
        return Task(kind, rng.choice(pickable), toggle=rng.choice(lamps))
    if kind in APPLIANCE:
        if APPLIANCE[kind] not in recep_types:
            return None
        placed = [o for o in placed if o in c.VAL_ACTION_OBJECTS[ACTION_SET[kind]]]
    options = [(o, r) for o in placed for r in recep_types
               if o in c.VAL_RECEPTACLE_OBJECTS.get(r, ()) and r != APPLIANCE.get(kind)]
    if not options:
        return None
    obj, recep = rng.choice(options)
    targets = sorted(i for i, r in scene.objects.items() if id_type(i) == obj)
    elsewhere = [r for r in sorted(scene.receptacles)
                 if id_type(r) != recep and obj in c.VAL_RECEPTACLE_OBJECTS.get(id_type(r), ())]
    if not elsewhere:
        return None
    for oid in targets:
        if id_type(scene.objects[oid]) == recep:
            scene.objects[oid] = rng.choice(elsewhere)
    if kind == "pick2" and len(targets) < 2:
        oid = f"{obj}|{_coord(rng)}|{_coord(rng)}|{_coord(rng)}"
        scene.objects[oid] = rng.choice(elsewhere)
    return Task(kind, obj, recep)


def goal_pddl(task: Task) -> str:
    """The goal from ALFWorld's goal library ('#' is the library's stand-in for PDDL's '-')."""
    import alfworld.gen.goal_library as glib

    text = glib.gdict[TASK_TYPES[task.kind]]["pddl"].format(obj=task.obj, recep=task.recep, toggle=task.toggle,
                                                             mrecep="")
    return text.replace("#", "-")


def task_sentence(task: Task, rng: random.Random) -> str:
    """One of the goal library's templated task sentences (what `add_task_to_grammar` fills in)."""
    import alfworld.gen.goal_library as glib

    template = rng.choice(glib.gdict[TASK_TYPES[task.kind]]["templates"])
    return template.format(obj=task.obj.lower(), recep=task.recep.lower(), toggle=task.toggle.lower(), mrecep="")


def problem_pddl(name: str, scene: Scene, task: Task) -> str:
    """The PDDL problem of a game, laid out like ALFWorld's initial_state.pddl files."""
    c = _constants()
    otypes = sorted(c.OBJECTS_SET - (c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET))
    rtypes = sorted(c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET)
    objects = sorted(scene.objects)
    receptacles = sorted(scene.receptacles)
    locations = sorted(set(scene.receptacles.values()) | {scene.agent_location})
    decl = ["agent1 - agent"]
    decl += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    decl += [f"{mangle(o)} - object" for o in objects] + [f"{mangle(r)} - receptacle" for r in receptacles]
    decl += [f"{mangle(l)} - location" for l in locations]
    init = [f"(atLocation agent1 {mangle(scene.agent_location)})"]
    for r in receptacles:
        kind = id_type(r)
        init.append(f"(receptacleType {mangle(r)} {kind}Type)")
        init.append(f"(receptacleAtLocation {mangle(r)} {mangle(scene.receptacles[r])})")
        if kind in c.OPENABLE_CLASS_SET:
            init.append(f"(openable {mangle(r)})")
    present = {id_type(o) for o in objects}
    for rt in sorted({id_type(r) for r in receptacles}):
        init += [f"(canContain {rt}Type {ot}Type)" for ot in sorted(present & set(c.VAL_RECEPTACLE_OBJECTS.get(rt, ())))]
    for o in objects:
        kind, m = id_type(o), mangle(o)
        init.append(f"(objectType {m} {kind}Type)")
        init.append(f"(inReceptacle {m} {mangle(scene.objects[o])})")
        init.append(f"(objectAtLocation {m} {mangle(scene.receptacles[scene.objects[o]])})")
        if kind in LAMPS:
            init.append(f"(toggleable {m})")
            continue
        init.append(f"(pickupable {m})")
        if kind in c.MOVABLE_RECEPTACLES_SET:
            init.append(f"(isReceptacleObject {m})")
        for prop, table in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable"),
                            ("sliceable", "Sliceable")):
            if kind in c.VAL_ACTION_OBJECTS[table]:
                init.append(f"({prop} {m})")
    indent = "\n        "
    return (f"\n(define (problem {name})\n(:domain alfred)\n(:objects\n{indent.join(decl)}\n        )\n\n"
            f"(:init\n        {indent.join(init)}\n        )\n\n{goal_pddl(task)}")


__all__ = ["TASK_TYPES", "SHORT_NAME", "TRAIN_COUNTS", "ROOM_TYPES", "Scene", "Task", "room_type", "split_scenes",
           "mangle", "id_type", "pose_location", "scene_tables", "sample_scene", "sample_task", "goal_pddl",
           "task_sentence", "problem_pddl"]
