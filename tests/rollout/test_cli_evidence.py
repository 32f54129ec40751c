"""`opsctl rollout m2|latency|ab`: the evidence checks from files, the embedded store and a real
Prometheus, with their exit codes."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import run_opsctl, write_config
from tests.quality.test_abtest import T0, ab_openmetrics
from tests.quality.test_m2 import GOLD


def test_m2_scores_an_answers_file_against_the_gold_edits(tmp_path):
    gold, answers = tmp_path / "gold.m2", tmp_path / "answers.txt"
    gold.write_text(GOLD)
    answers.write_text("\n".join(["The cat sat on mat .", "He goes to the school every days .", "I have a apple .",
                                  "All is good .", "She look at it .", "He is is here ."]) + "\n")
    result = run_opsctl("--config", write_config(tmp_path), "rollout", "m2", gold, answers, "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["tp"], data["fp"], data["fn"]) == (3, 2, 4)  # worked by hand in tests/quality/test_m2.py
    assert data["precision"] == pytest.approx(0.6) and data["f05"] == pytest.approx(0.5555555, abs=1e-6)
    answers.write_text("one line\n")
    result = run_opsctl("--config", write_config(tmp_path), "rollout", "m2", gold, answers)
    assert result.exit_code == 2 and "1 answers for 6 M2 sentences" in result.output


def _store(tmp_path, internal, databricks):
    from opsctl.metrics.embedded import EmbeddedStore

    end, count = 1_795_000_000, 360
    ts = [end - (count - 1 - i) * 10 for i in range(count)]
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    for backend, buckets in (("internal", internal), ("databricks", databricks)):
        cols = {"req_ok": [1000] * count, "lat_count": [1000] * count, "lat_sum": [200.0] * count}
        cols.update({f"le_{i}": [c] * count for i, c in enumerate(buckets)})
        store.write_steps(backend, ts, cols, mode="replace")
    store.close()
    return write_config(tmp_path)


FAST = (100, 400, 800, 950, 990, 996, 999, 1000, 1000, 1000, 1000)  # 1% over 500 ms
SLOW = (20, 100, 300, 600, 900, 960, 990, 998, 1000, 1000, 1000)    # 10% over 500 ms


def test_latency_judge_exits_0_on_equivalent_and_1_on_worse(tmp_path):
    cfg = _store(tmp_path / "same", FAST, FAST)
    result = run_opsctl("--config", cfg, "rollout", "latency", "--baseline", "internal", "--candidate", "databricks",
                        "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == "equivalent"
    cfg = _store(tmp_path / "slow", FAST, SLOW)
    result = run_opsctl("--config", cfg, "rollout", "latency", "--baseline", "internal", "--candidate", "databricks")
    assert result.exit_code == 1
    assert "worse (abort): over 0.5s databricks 10.000% vs internal 1.000%" in result.stdout
    result = run_opsctl("--config", cfg, "rollout", "latency", "--baseline", "internal", "--candidate", "databricks",
                        "--threshold", "0.4")
    assert result.exit_code == 2 and "threshold 0.4s is not a bucket bound" in result.output


@pytest.mark.slow
def test_ab_reads_the_arms_from_prometheus_and_waits_for_its_horizon(tmp_path, prometheus_factory):
    server = prometheus_factory(openmetrics=ab_openmetrics(tmp_path / "ab.om"))
    cfg = write_config(tmp_path, source="prometheus", prometheus_url=server.url)

    def plan(margin, daily=""):
        path = tmp_path / f"plan-{margin}{daily}.yaml"
        path.write_text(textwrap.dedent(f"""\
            name: ab-only
            backend: databricks
            baseline: internal
            stages:
              - ab:
                  share: 10
                  min_duration: 1h
                  {f"daily_trials: {daily}" if daily else ""}
                  metrics:
                    - name: acceptance
                      successes: sum(increase(grammar_suggestions_accepted_total{{arm="$arm"}}[$window]))
                      trials: sum(increase(grammar_suggestions_shown_total{{arm="$arm"}}[$window]))
                      margin: {margin}
                      baseline: 0.32
            """))
        return path

    at = "2026-09-21T15:13:20Z"  # T0 + 1h
    assert T0 + 3600 == 1_790_003_600
    # margin 5 points: n = (1.645 + 1.282)^2 * 2 * .32 * .68 / .05^2 = 1,491 per arm; 6,000 and 54,000 shown.
    # 0.31 - 0.32 = -1 point, se = sqrt(.32*.68/54000 + .31*.69/6000) = 0.63 points: the 90% interval
    # (-2.04, +0.04) lies inside ±5.
    result = run_opsctl("--config", cfg, "rollout", "ab", plan(0.05), "--at", at, "-o", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["n_a"], row["n_b"]) == (54_000, 6_000) and row["verdict"] == "equivalent"
    assert row["difference"] == pytest.approx(0.31 - 0.32)
    # margin half a point: 149,000 per arm needed, 6,000 seen: inconclusive, exit 3, whatever the figures
    result = run_opsctl("--config", cfg, "rollout", "ab", plan(0.005), "--at", at)
    assert result.exit_code == 3
    assert "horizon not reached: 6000 of" in result.stdout
    # Days at today's traffic: with the plan's 120,000 trials a day at a 10% share, the smaller arm
    # fills at 12,000 a day, so the horizon takes needed / 12,000 days, in the table and in JSON.
    result = run_opsctl("--config", cfg, "rollout", "ab", plan(0.005, 120000), "--at", at, "-o", "json")
    assert result.exit_code == 3, result.output
    [row] = json.loads(result.stdout)
    assert row["daily_basis"] == "plan" and row["daily_trials"] == 120_000
    # the closed form for half a point: (1.645 + 1.282)^2 * 2 * .32 * .68 / .005^2 = 149,100 per arm
    # with equal arms; the arms are 10/90 (k = 9), so the smaller needs 149,100 * (1 + 1/9) / 2 = 82,833
    assert row["needed"] == pytest.approx(149_100 * (1 + 1 / 9) / 2, rel=0.01)
    assert row["days"] == pytest.approx(row["needed"] / 12_000, abs=0.005)
    table = run_opsctl("--config", cfg, "rollout", "ab", plan(0.005, 120000), "--at", at)
    assert f"the horizon takes {row['days']:g} days at 120,000 trials a day (plan)" in table.stdout


def test_the_shipped_gold_set_scores_a_perfect_answer_at_one():
    from opsctl.quality.m2 import load_m2, score
    from tests.conftest import REPO

    sentences = load_m2(REPO / "rollouts" / "golden.m2")
    answers = ["The cat sat on the mat .", "He goes to school every day .", "I have an apple .", "All good .",
               "She is looking at it ."]
    result = score(sentences, answers)
    assert (result.tp, result.fp, result.fn) == (7, 0, 0)  # 2 + 2 + 2 + 0 + 1 gold edits
