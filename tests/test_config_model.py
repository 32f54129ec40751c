"""The typed-model engine (opsctl.model): Model classes behave as frozen dataclasses, `build` takes
models and plain dataclasses alike and reports every problem at once, durations are parsed once."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pytest
import yaml

from opsctl.errors import ConfigError
from opsctl.model import Duration, Model, build, build_into, field, to_dict
from opsctl.model.build import JSON
from opsctl.model.checks import Count, Labels, NonEmpty, Text


class Inner(Model):
    port: int
    host: str = "127.0.0.1"


class Outer(Model):
    name: str
    inner: Inner = field(default_factory=lambda: Inner(port=80))
    tags: tuple[str, ...] = ()
    every: Duration = "5m"
    grace: Duration | None = None
    mode: Literal["a", "b"] = "a"

    def __post_init__(self):
        if self.every.seconds > 3600:
            raise ValueError("every must be at most 1h")


@dataclass(frozen=True)
class PlainInner:
    port: int


@dataclass(frozen=True)
class Plain:
    name: str
    inner: PlainInner
    every: Duration = Duration("1m")
    ports: list[int] = dataclasses.field(default_factory=list)


def test_a_model_is_a_frozen_dataclass_to_the_dataclasses_module():
    o = Outer("x", Inner(8080))
    assert dataclasses.is_dataclass(o)
    assert [f.name for f in dataclasses.fields(Outer)] == ["name", "inner", "tags", "every", "grace", "mode"]
    assert dataclasses.asdict(o) == {"name": "x", "inner": {"port": 8080, "host": "127.0.0.1"}, "tags": (),
                                     "every": "5m", "grace": None, "mode": "a"}
    changed = dataclasses.replace(o, name="y")
    assert (changed.name, changed.inner, o.name) == ("y", Inner(8080), "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.name = "z"
    assert o == Outer("x", Inner(8080)) and hash(o) == hash(Outer("x", Inner(8080)))
    assert o != changed
    assert repr(Inner(1)) == "Inner(port=1, host='127.0.0.1')"


def test_a_model_refuses_what_a_dataclass_constructor_refuses():
    with pytest.raises(TypeError, match="missing 1 required argument: 'port'"):
        Inner()
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Inner(port=1, colour="red")
    with pytest.raises(TypeError, match="multiple values for argument 'port'"):
        Inner(1, port=2)
    with pytest.raises(ValueError, match="every must be at most 1h"):
        Outer("x", every="2h")


def test_defaults_factories_and_post_init_run_per_instance():
    a, b = Outer("a"), Outer("b")
    assert a.inner == Inner(80) and a.inner is not b.inner
    assert Outer.every == "5m" and Outer.every.seconds == 300  # the class attribute a dataclass leaves


def test_a_duration_is_its_text_and_carries_its_seconds_through_copies():
    o = Outer("x", every="1h")
    assert o.every == "1h" and o.every.seconds == 3600 and isinstance(o.every, str)
    assert dataclasses.replace(o, every="90s").every.seconds == 90  # replace coerces as the builder does
    assert pickle.loads(pickle.dumps(o)).every.seconds == 3600
    assert copy.deepcopy(o).every.seconds == 3600
    assert Duration(Duration("2m")).seconds == 120
    with pytest.raises(ValueError, match="invalid duration 'soon'"):
        Duration("soon")


def test_build_reports_every_problem_with_its_key_path():
    data = {"name": 3, "inner": {"port": "eighty", "colour": "red"}, "every": "soon", "mode": "c",
            "tags": "one", "extra": 1}
    with pytest.raises(ConfigError) as info:
        build(Outer, data, "f.yaml")
    assert sorted(info.value.problems) == sorted([
        "f.yaml: extra: unknown key (known keys: every, grace, inner, mode, name, tags)",
        "f.yaml: name: expected a string, got int 3",
        "f.yaml: inner.colour: unknown key (known keys: host, port)",
        "f.yaml: inner.port: expected an integer, got str 'eighty'",
        "f.yaml: tags: expected a list, got str 'one'",
        "f.yaml: every: invalid duration 'soon': use forms like 30s, 5m, 1h30m, 28d",
        "f.yaml: mode: must be one of 'a', 'b', got str 'c'",
    ])


def test_build_runs_the_models_own_checks_at_the_sections_path():
    with pytest.raises(ConfigError) as info:
        build(Outer, {"name": "x", "every": "2h"}, "f.yaml")
    assert info.value.problems == ["f.yaml: (top level): every must be at most 1h"]


def test_build_takes_plain_dataclasses_as_it_takes_models():
    built = build(Plain, {"name": "p", "inner": {"port": 9}, "every": "2m", "ports": [1, 2]}, "s.yaml")
    assert built == Plain("p", PlainInner(9), Duration("2m"), [1, 2]) and built.every.seconds == 120
    with pytest.raises(ConfigError) as info:
        build(Plain, {"inner": {"port": True}, "every": 5}, "s.yaml")
    assert sorted(info.value.problems) == [
        "s.yaml: every: expected a string, got int 5",
        "s.yaml: inner.port: expected an integer, got bool True",
        "s.yaml: name: required key is missing",
    ]


def test_to_dict_renders_typed_scalars_as_the_text_written():
    o = Outer("x", every="10m")
    data = to_dict(o)
    assert data["every"] == "10m" and type(data["every"]) is str
    assert yaml.safe_load(yaml.safe_dump(data))["every"] == "10m"


def test_the_loaded_config_holds_durations_parsed_once():
    from opsctl.config import load_config

    cfg = load_config()
    assert cfg.slos.period.seconds == cfg.slos.period_seconds == 28 * 86400
    assert isinstance(cfg.traffic.ramp.interval, Duration)
    assert cfg.traffic.ramp.interval.seconds == Duration(str(cfg.traffic.ramp.interval)).seconds


class Wire(Model):
    unknown_keys = "ignore"

    group_key: str = field(metadata={"alias": "groupKey"})
    state: Literal["firing", "resolved"] = "firing"


def test_a_model_may_read_another_key_tolerate_unknown_ones_and_speak_json():
    problems: list[str] = []
    assert build_into(Wire, {"groupKey": "g", "newer": 1}, "", problems, JSON) == Wire("g") and problems == []
    build_into(Wire, {"state": 7}, "", problems, JSON)
    assert problems == ["groupKey: required field is missing", "state: expected a string, got a number"]
    problems.clear()
    build_into(Wire, {"groupKey": "g", "state": 7}, "", problems, JSON)
    build_into(Wire, {"groupKey": "g", "state": "pending"}, "", problems, JSON)
    build_into(Wire, [1], "", problems, JSON)
    assert problems == ["state: expected a string, got a number",
                        "state: must be one of firing, resolved, got 'pending'",
                        "body: expected a JSON object, got an array"]


class Msg(Model):
    id: Annotated[str, Text(max_len=8, nonempty=True, ident=True)]
    hexa: Annotated[str, Text(pattern=re.compile("[0-9a-f]+"), expected="hex")]
    labels: Annotated[Any, Labels(max_entries=2, idents=True)]
    items: Annotated[list[int], NonEmpty("item")]
    count: Annotated[Any, Count()] = 0


def test_checks_carried_in_annotations_name_the_field():
    def problems_of(data):
        problems: list[str] = []
        build_into(Msg, data, "", problems, JSON)
        return problems

    good = {"id": "a1", "hexa": "ff", "labels": {"k": "v"}, "items": [1]}
    assert problems_of(good) == []
    assert problems_of({**good, "id": "123456789"}) == ["id: longer than 8 characters"]
    assert problems_of({**good, "id": ""}) == ["id: must not be empty"]
    assert problems_of({**good, "id": "a\nb"}) == ["id: must not contain control characters (CR, LF, ...)"]
    assert problems_of({**good, "hexa": "XYZ"}) == ["hexa: expected hex, got 'XYZ'"]
    assert problems_of({**good, "labels": {"a": "1", "b": "2", "c": "3"}}) == ["labels: more than 2 entries"]
    assert problems_of({**good, "labels": {"a": 1}}) == ["labels: values must be strings ('a')"]
    assert problems_of({**good, "labels": None}) == ["labels: expected an object of strings, got null"]
    assert problems_of({**good, "items": []}) == ["items: must hold at least one item"]
    assert problems_of({**good, "count": -1}) == ["count: expected a whole number >= 0, got a number"]
    assert problems_of({**good, "count": True}) == ["count: expected a whole number >= 0, got a boolean"]
