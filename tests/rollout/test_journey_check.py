"""A journey's verdict on a simulated run (`rollout.journey.problems_of`), from the run's end alone:
its status, the step it stopped at and the check named by its abort."""

from __future__ import annotations

from opsctl.rollout.journey import JourneyRun, problems_of
from opsctl.rollout.simrun import RunResult

ABORT = {"at": "2026-11-03T17:00:00Z", "step": 2, "what": "aborted",
         "detail": "burn-rate failed 2 time(s) (limit 1): max_burn=5024; returned to internal 100 / databricks 0"}


def ended(status: str, step: int, *history: dict) -> RunResult:
    return RunResult(status, step, 0.0, 3600.0, 4, 4, 0.1, list(history))


def test_a_run_ending_as_its_journey_expects_has_no_problem():
    assert problems_of(ended("completed", 3), JourneyRun("ok", "completed")) == []
    assert problems_of(ended("aborted", 2, ABORT), JourneyRun("outage", "aborted", [], 2, "burn-rate")) == []


def test_a_completed_run_the_journey_expects_aborted_says_all_three_differences():
    assert problems_of(ended("completed", 3), JourneyRun("wrong", "aborted", [], 2, "latency-judge")) == [
        "ended completed, the journey expects aborted",
        "stopped at step 3, the journey expects step 2",
        "not aborted by latency-judge"]


def test_an_abort_by_another_check_is_named_even_at_the_expected_step():
    assert problems_of(ended("aborted", 2, ABORT), JourneyRun("x", "aborted", [], 2, "latency-judge")) == [
        "not aborted by latency-judge"]
    # the check is read from the start of the abort's detail, not anywhere in it
    assert problems_of(ended("aborted", 2, ABORT), JourneyRun("x", "aborted", [], None, "max_burn")) == [
        "not aborted by max_burn"]
