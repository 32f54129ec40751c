"""Rollout inputs from outside: plan files, M2 gold files and a flagd definition someone else edited.
Whatever the content: a result or one error naming the file (and key path or line), never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from opsctl.config.loading import parse_yaml
from opsctl.errors import ConfigError, UsageError
from opsctl.freeze import FreezeCalendar, FreezeWindow
from opsctl.quality.m2 import parse_m2, score
from opsctl.rollout.calendar import schedule
from opsctl.rollout.plan import build_plan
from opsctl.traffic.flagd import FlagdFileActuator
from tests.conftest import REPO
from tests.property.helpers import mutate, values

EXAMPLE_PATH = REPO / "rollouts" / "vendor-migration.yaml"
EXAMPLE = parse_yaml(EXAMPLE_PATH.read_text(), EXAMPLE_PATH)
FREEZES = FreezeCalendar([FreezeWindow(name="thanksgiving", timezone="America/New_York", cron="0 0 * 11 thu#4",
                                       duration="4d")])


@st.composite
def mutated_plans(draw):
    return mutate(EXAMPLE, draw, depth=6)


@given(mutated_plans())
def test_any_plan_builds_and_schedules_or_lists_its_problems_with_the_file(data):
    try:
        plan = build_plan(data, "plan.yaml", backends=["internal", "databricks"])
    except ConfigError as exc:
        assert exc.problems and all(p.startswith("plan.yaml: ") and "\n" not in p for p in exc.problems)
        return
    try:
        result = schedule(plan, FREEZES, 1_793_000_000.0)
    except UsageError:
        return
    assert all(a.end <= b.start for a, b in zip(result.steps, result.steps[1:]))


M2_LINES = st.lists(st.one_of(
    st.just("S The cat sat at mat ."),
    st.just("A 3 4|||R:PREP|||on|||REQUIRED|||-NONE-|||0"),
    st.just("A -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0"),
    st.builds(lambda a, b, c, k: f"A {a} {b}|||X|||{c}|||REQUIRED|||-NONE-|||{k}",
              st.integers(-2, 9), st.integers(-2, 9), st.text(max_size=8), st.integers(-1, 3)),
    st.just(""),
    st.text(max_size=30),
), max_size=10)


@given(M2_LINES, st.lists(st.text(max_size=30), max_size=4))
def test_any_m2_file_parses_and_scores_or_names_the_line(lines, answers):
    try:
        sentences = parse_m2("\n".join(lines), "gold.m2")
    except UsageError as exc:
        assert exc.message.startswith("gold.m2: line ")
        return
    try:
        result = score(sentences, answers[:len(sentences)] + [""] * max(0, len(sentences) - len(answers)))
    except UsageError:
        return
    assert 0 <= result.precision <= 1 and 0 <= result.recall <= 1 and 0 <= result.f <= 1


@given(st.one_of(values.map(json.dumps), st.text(max_size=40),
                 st.builds(lambda flag: json.dumps({"flags": {"llm-backend": flag}}), values)))
def test_any_flag_definition_reads_as_a_split_or_as_corrupt_never_a_traceback(text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flags.json"
        path.write_text(text)
        stored = FlagdFileActuator(path, flag="llm-backend", default=None, backends=["internal", "databricks"]).read()
        assert stored.split is not None or stored.corrupt or stored.note
