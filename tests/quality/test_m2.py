"""M2 precision / recall / F0.5, MaxMatch-style; expected figures worked out by hand in each case."""

from __future__ import annotations

import pytest

from opsctl.errors import UsageError
from opsctl.quality.m2 import parse_m2, score

GOLD = """\
S The cat sat at mat .
A 3 4|||R:PREP|||on|||REQUIRED|||-NONE-|||0
A 4 4|||M:DET|||the||a|||REQUIRED|||-NONE-|||0

S He go to school every days .
A 1 2|||R:VERB:SVA|||goes|||REQUIRED|||-NONE-|||0
A 5 6|||R:NOUN:NUM|||day|||REQUIRED|||-NONE-|||0

S I has a apple .
A 1 2|||R:VERB:SVA|||have|||REQUIRED|||-NONE-|||0
A 2 3|||R:DET|||an|||REQUIRED|||-NONE-|||0
A 1 2|||R:VERB:SVA|||have|||REQUIRED|||-NONE-|||1

S All good .
A -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0

S She look at it .
A 1 2|||R:VERB|||is looking|||REQUIRED|||-NONE-|||0

S He is is here .
A 2 3|||U:VERB|||-NONE-|||REQUIRED|||-NONE-|||0
"""


def test_a_perfect_correction_scores_one():
    sentences = parse_m2(GOLD)
    answers = ["The cat sat on the mat .", "He goes to school every day .", "I have an apple .", "All good .",
               "She is looking at it .", "He is here ."]
    result = score(sentences, answers)
    # gold edits: 2 + 2 + 2 (annotator 0 is the better one) + 0 + 1 + 1 = 8, all found, none extra
    assert (result.tp, result.fp, result.fn) == (8, 0, 0)
    assert result.precision == result.recall == result.f == 1.0


def test_maxmatch_reads_adjacent_changes_as_the_gold_edits():
    sentences = parse_m2(GOLD)
    # "at -> on" and "insert the" touch each other: read as two edits, both gold (not one "on the").
    assert (score(sentences[:1], ["The cat sat on the mat ."]).tp) == 2
    # "look -> is looking" is two token changes, one gold edit: read as one edit, one true positive.
    one = score(sentences[4:5], ["She is looking at it ."])
    assert (one.tp, one.fp, one.fn) == (1, 0, 0)
    # deleting either "is" of "is is" makes the gold sentence: a true positive.
    assert score(sentences[5:6], ["He is here ."]).tp == 1


def test_mixed_answers_give_precision_recall_and_f05_by_hand():
    sentences = parse_m2(GOLD)
    answers = [
        "The cat sat on mat .",           # 1 TP (on), 1 FN (the)
        "He goes to the school every days .",  # 1 TP (goes), 1 FP (the), 1 FN (day)
        "I have a apple .",               # annotator 1 (have only): 1 TP, 0 FN beats annotator 0's 1 FN
        "All is good .",                  # noop gold: 1 FP
        "She look at it .",               # 1 FN
        "He is is here .",                # 1 FN
    ]
    result = score(sentences, answers)
    tp, fp, fn = 3, 2, 4
    assert (result.tp, result.fp, result.fn) == (tp, fp, fn)
    p, r = tp / (tp + fp), tp / (tp + fn)  # 0.6, 3/7
    assert result.precision == pytest.approx(0.6)
    assert result.recall == pytest.approx(3 / 7)
    assert result.f == pytest.approx(1.25 * p * r / (0.25 * p + r))  # = 0.5555...
    assert result.f == pytest.approx(0.5555555, abs=1e-6)
    assert result.to_dict()["f05"] == pytest.approx(result.f)


def test_no_system_edits_has_precision_one_and_no_recall():
    sentences = parse_m2(GOLD)
    result = score(sentences[:2], ["The cat sat at mat .", "He go to school every days ."])
    assert (result.tp, result.fp, result.fn) == (0, 0, 4)
    assert result.precision == 1.0 and result.recall == 0.0 and result.f == 0.0


@pytest.mark.parametrize("text, message", [
    ("A 1 2|||X|||y|||REQUIRED|||-NONE-|||0\n", "line 1: an 'A' line before its 'S' line"),
    ("S a b\nA 1 9|||X|||y|||REQUIRED|||-NONE-|||0\n", "line 2: span 1 9 is outside the 2 source tokens"),
    ("S a b\nA 1 2|||X|||y\n", "line 2: an edit has 6 fields"),
    ("S a b\nT what\n", "line 2: expected an 'S ' or 'A ' line"),
])
def test_a_malformed_m2_file_is_refused_naming_the_line(text, message):
    with pytest.raises(UsageError, match=message):
        parse_m2(text, "gold.m2")


def test_one_answer_per_sentence_is_required():
    with pytest.raises(UsageError, match="2 answers for 6 M2 sentences"):
        score(parse_m2(GOLD), ["a", "b"])


def test_a_sentence_built_without_annotators_scores_as_one_with_no_gold_edits():
    """M2Sentence is a model anyone may build; with no annotator its edits are all false positives
    (as parse_m2 reads a sentence with no 'A' line), where scoring it used to raise TypeError."""
    from opsctl.quality.m2 import M2Sentence

    sentence = M2Sentence(("He", "go", "home", "."), ())
    result = score([sentence], ["He goes home ."])  # one edit: go -> goes
    assert (result.tp, result.fp, result.fn) == (0, 1, 0)
    read = score(parse_m2("S He go home .\n"), ["He goes home ."])
    assert (read.tp, read.fp, read.fn) == (0, 1, 0)
