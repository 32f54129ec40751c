"""M2 as the M2 scorer counts it (issue 39 item 3): edits that span up to 2 unchanged words, the
annotator chosen as the scorer chooses it, gold against itself 1.0, answers tokenized as the gold
source ("day." -> "day ."). Counts worked by hand in each test; the small shipped set
(tests/quality/m2_reference/) also against the figures the published NUS M2 scorer (m2scorer.py,
Python 2.7, default options: --max_unchanged_words 2, --beta 0.5) printed for it here:
Precision 0.8750, Recall 1.0000, F_0.5 0.8974."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsctl.quality.m2 import load_m2, parse_m2, score, tokenize

HERE = Path(__file__).parent / "m2_reference"
ME_AND_HIM = "S Me and him went home .\nA 0 3|||R:PRON|||He and I|||REQUIRED|||-NONE-|||0\n"


def test_an_edit_spanning_an_unchanged_word_is_one_true_positive():
    # "Me and him" -> "He and I": two changed tokens around the unchanged "and"; the scorer reads
    # them as one edit over source tokens 0-3 (1 unchanged word <= 2): that is the gold edit.
    # By hand: TP 1, FP 0, FN 0.
    result = score(parse_m2(ME_AND_HIM), ["He and I went home ."])
    assert (result.tp, result.fp, result.fn) == (1, 0, 0)
    assert result.f == 1.0


def test_without_the_span_the_same_changes_are_two_false_positives_and_a_miss():
    # max_unchanged 0: "Me -> He" and "him -> I" cannot be joined across "and": 2 FP, 1 FN by hand
    result = score(parse_m2(ME_AND_HIM), ["He and I went home ."], max_unchanged=0)
    assert (result.tp, result.fp, result.fn) == (0, 2, 1)


def test_the_gold_corrections_score_one():
    sentences = load_m2(HERE / "gold.m2")
    corrected = ["He and I went to the shop .", "The cat sat on the mat .", "He goes to school every day .",
                 "I have an apple .", "She is looking at it .", "All good ."]
    result = score(sentences, corrected)
    # gold edits 1 + 2 + 2 + 2 (annotator 0: the better F) + 1 + 0 = 8, all found
    assert (result.tp, result.fp, result.fn) == (8, 0, 0)
    assert result.precision == result.recall == result.f == 1.0


def test_the_shipped_set_by_hand_and_as_the_published_scorer_printed_it():
    sentences = load_m2(HERE / "gold.m2")
    answers = (HERE / "answers.txt").read_text().splitlines()
    result = score(sentences, answers)
    # by hand: 1 (He and I) + 2 (on, the) + 2 (goes, day) + 1 (have; annotator 1, no miss) + 1 (is
    # looking) = 7 TP; "All is good" against a noop: 1 FP; nothing missed
    tp, fp, fn = 7, 1, 0
    assert (result.tp, result.fp, result.fn) == (tp, fp, fn)
    p, r = tp / (tp + fp), tp / (tp + fn)
    assert result.f == pytest.approx(1.25 * p * r / (0.25 * p + r))
    # the published scorer's output for these two files, to its 4 decimals
    assert (round(result.precision, 4), round(result.recall, 4), round(result.f, 4)) == (0.875, 1.0, 0.8974)


def test_answers_are_tokenized_as_the_gold_source():
    assert tokenize("He goes to school every day.") == ("He", "goes", "to", "school", "every", "day", ".")
    assert tokenize('He said, "don\'t go.') == ("He", "said", ",", '"', "do", "n't", "go", ".")
    sentences = parse_m2("S He go to school every days .\nA 1 2|||R:VERB|||goes|||REQUIRED|||-NONE-|||0\n"
                         "A 5 6|||R:NOUN|||day|||REQUIRED|||-NONE-|||0\n")
    untokenized = score(sentences, ["He goes to school every day."])
    assert (untokenized.tp, untokenized.fp, untokenized.fn) == (2, 0, 0)  # "day." read as "day ."
    raw = score(sentences, ["He goes to school every day."], tokenized=True)
    # read as the scorer reads untokenized text: "days ." -> "day." one edit spanning 5-7, no gold: 1 TP, 1 FP, 1 FN
    assert (raw.tp, raw.fp, raw.fn) == (1, 1, 1)


def test_the_gold_sources_are_unchanged_by_the_tokenizer():
    for path in (HERE / "gold.m2", Path(__file__).parents[2] / "rollouts" / "golden.m2"):
        for sentence in load_m2(path):
            assert tokenize(" ".join(sentence.source)) == sentence.source
