"""The exact-match noise floor: the arithmetic by hand, and `probe consistency --repeat` end to end
against loopback model servers, one of which answers two prompts differently every other call."""

from __future__ import annotations

import json

import pytest

from opsctl.quality.noise import agreement, between_threshold, cross_agreement, self_agreement
from tests.fakes.openai_fake import OpenAIFake
from tests.quality.test_probe import ANSWERS, PROMPTS, Backends, golden_file, probe

R1 = ["a", "b", "c", "d"]
R2 = ["a", "b", "c", "x"]
R3 = ["a", "y", "c", "x"]


def test_agreement_is_the_share_answered_identically_and_no_answer_never_matches():
    assert agreement(R1, R2) == 3 / 4
    assert agreement([None, "a"], [None, "a"]) == 1 / 2


def test_self_agreement_is_the_mean_over_every_pair_of_runs():
    # (R1, R2) 3/4, (R1, R3) 2/4, (R2, R3) 3/4
    assert self_agreement([R1, R2, R3]) == pytest.approx((0.75 + 0.5 + 0.75) / 3)
    with pytest.raises(ValueError):
        self_agreement([R1])


def test_cross_agreement_is_the_mean_over_every_pair_of_one_run_each():
    # (R1, R3) 2/4, (R2, R3) 3/4
    assert cross_agreement([R1, R2], [R3]) == pytest.approx(0.625)


def test_the_between_threshold_is_relative_to_the_lower_floor_or_absolute():
    assert between_threshold(0.9, 0.8, 0.98, 0.94)[0] == pytest.approx(0.784)
    assert between_threshold(0.9, 0.8, None, 0.94)[0] == 0.94


class NoisyBackends(Backends):
    """The internal pods answer prompts 3 and 12 differently every other call."""

    NOISY = {PROMPTS[3]: [ANSWERS[PROMPTS[3]], ANSWERS[PROMPTS[3]] + " Regards."],
             PROMPTS[12]: [ANSWERS[PROMPTS[12]], "We have fixed it."]}

    def __init__(self):
        super().__init__(drop_bos=False)
        self.internal = OpenAIFake(ANSWERS, accept=self.internal.accept, unstable=self.NOISY)


# By hand, 4 runs: internal's runs 1 and 3 answer all 20 prompts as usual, runs 2 and 4 differ on 2.
# Internal floor: pairs (1,3) and (2,4) agree on 20/20, the other 4 pairs on 18/20:
#   (2 x 1 + 4 x 0.9) / 6 = 0.9333...; databricks is stable: 1.0.
# Between: half of internal's runs agree with every databricks run on 20/20, half on 18/20: 0.95.
FLOOR_INTERNAL = (2 * 1.0 + 4 * 0.9) / 6
BETWEEN = 0.95


@pytest.mark.parametrize("setting, passes, threshold", [
    ("min_exact_match_between: 0.97", False, 0.97),  # absolute: 95% is under 97%
    ("min_exact_match_between: 0.97, min_exact_match_between_vs_floor: 0.98", True, 0.98 * FLOOR_INTERNAL),
])
def test_repeat_reports_the_noise_floor_and_judges_the_backends_against_the_threshold(
        opsctl, tmp_path, setting, passes, threshold):
    with NoisyBackends() as b:
        cfg = b.config(tmp_path)
        cfg.write_text(cfg.read_text().replace("deadline: 60}", f"deadline: 60, {setting}}}"))
        result = probe(opsctl, cfg, golden_file(tmp_path), "--repeat", "4", "--backend", "internal",
                       "--backend", "databricks", "-o", "json")
        table = probe(opsctl, cfg, golden_file(tmp_path), "--repeat", "4", "--backend", "internal",
                      "--backend", "databricks")
    assert result.exit_code == (0 if passes else 1), result.stderr
    data = json.loads(result.stdout)
    noise = data["noise"]
    assert noise["repeat"] == 4
    assert noise["floors"]["internal"] == pytest.approx(FLOOR_INTERNAL)
    assert noise["floors"]["databricks"] == 1.0
    [pair] = noise["pairs"]
    assert pair["exact_match"] == pytest.approx(BETWEEN) and pair["threshold"] == pytest.approx(threshold)
    [check] = [c for c in data["checks"] if c["name"] == "internal vs databricks"]
    assert check["ok"] is passes
    assert "Noise floor over 4 runs" in table.stdout and "internal: 93.3%" in table.stdout
    assert "95.0% over every pair of runs" in table.stdout
