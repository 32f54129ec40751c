"""M2 precision, recall and F0.5 of a system's corrections against gold edits in M2 format.

M2 (the CoNLL-2014 format): a block per sentence, `S` and the tokenized source, then one `A` line
per gold edit, `A start end|||type|||correction|||REQUIRED|||-NONE-|||annotator`, where start and
end are token offsets into the source, the correction may list alternatives separated by `||`,
`-NONE-` (or empty) deletes, and `-1 -1|||noop` says that annotator made no edit. Tokens are what
the file says they are (split on whitespace): no tokenizer model.

Scoring, MaxMatch-style (Dahlmeier & Ng 2012): the system's answer is a corrected sentence. Its
edits come from a token-level Levenshtein alignment with the source; a run of adjacent changed
tokens may be read as one edit or as several (every segmentation of the run's source and answer
tokens), and of all those readings the one that matches the most gold edits is chosen (then the
fewest edits): MaxMatch's search over the edit lattice, within each changed run. An edit matches a gold edit when the span and the correction are
equal (any alternative), or when both make the same sentence of the source (deleting the first or
the second of two equal tokens). Per sentence, the annotator is the one that gives the best F0.5 to the
running totals, as the M2 scorer does. Corpus totals: P = TP / (TP + FP) (1 with no system edit),
R = TP / (TP + FN) (1 with no gold edit), F_beta = (1 + b^2) P R / (b^2 P + R).
"""

from __future__ import annotations

from pathlib import Path

from opsctl.errors import UsageError
from opsctl.model import Model

Edit = tuple[int, int, tuple[str, ...]]  # (start, end, correction tokens)


class GoldEdit(Model):
    start: int
    end: int
    corrections: tuple[tuple[str, ...], ...]  # alternatives

    def matches(self, edit: Edit, source: tuple[str, ...]) -> bool:
        """Equal span and correction, or the same corrected sentence (deleting the first or the second
        of two equal tokens is one edit: MaxMatch's lattice holds both readings)."""
        if edit[0] == self.start and edit[1] == self.end and edit[2] in self.corrections:
            return True
        if abs(edit[0] - self.start) > len(source) or not (edit[1] >= self.start - 1 and self.end >= edit[0] - 1):
            return False
        result = source[:edit[0]] + edit[2] + source[edit[1]:]
        return any(source[:self.start] + c + source[self.end:] == result for c in self.corrections)


class M2Sentence(Model):
    source: tuple[str, ...]
    annotators: tuple[tuple[GoldEdit, ...], ...]  # one edit list per annotator (at least one, maybe empty)


class M2Score(Model):
    tp: int
    fp: int
    fn: int
    beta: float = 0.5

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f(self) -> float:
        return f_beta(self.precision, self.recall, self.beta)

    def to_dict(self) -> dict:
        return {"tp": self.tp, "fp": self.fp, "fn": self.fn, "precision": self.precision, "recall": self.recall,
                "f05" if self.beta == 0.5 else f"f{self.beta:g}": self.f}


def f_beta(p: float, r: float, beta: float) -> float:
    b2 = beta * beta
    return (1 + b2) * p * r / (b2 * p + r) if p + r else 0.0


def parse_m2(text: str, where: str = "M2") -> list[M2Sentence]:
    """The sentences of an M2 file; a malformed line is a UsageError naming its line number."""
    sentences: list[M2Sentence] = []
    source: tuple[str, ...] | None = None
    edits: dict[int, list[GoldEdit]] = {}

    def close():
        if source is not None:
            ids = sorted(edits) or [0]
            sentences.append(M2Sentence(source, tuple(tuple(edits.get(i, [])) for i in ids)))

    for number, line in enumerate(text.splitlines(), 1):
        line = line.rstrip("\n")
        if not line.strip():
            close()
            source, edits = None, {}
            continue
        if line.startswith("S ") or line == "S":
            close()
            source, edits = tuple(line[2:].split()), {}
            continue
        if not line.startswith("A "):
            raise UsageError(f"{where}: line {number}: expected an 'S ' or 'A ' line")
        if source is None:
            raise UsageError(f"{where}: line {number}: an 'A' line before its 'S' line")
        fields = line[2:].split("|||")
        if len(fields) != 6:
            raise UsageError(f"{where}: line {number}: an edit has 6 fields separated by '|||', got {len(fields)}")
        span = fields[0].split()
        try:
            start, end, annotator = int(span[0]), int(span[1]), int(fields[5])
        except (ValueError, IndexError):
            raise UsageError(f"{where}: line {number}: 'start end' and the annotator must be integers") from None
        edits.setdefault(annotator, [])
        if fields[1].strip().lower() == "noop" or (start, end) == (-1, -1):
            continue
        if not 0 <= start <= end <= len(source):
            raise UsageError(f"{where}: line {number}: span {start} {end} is outside the {len(source)} source tokens")
        alternatives = tuple(tuple(() if alt.strip() in ("", "-NONE-") else alt.split())
                             for alt in fields[2].split("||"))
        edits[annotator].append(GoldEdit(start, end, alternatives))
    close()
    return sentences


def load_m2(path: str | Path) -> list[M2Sentence]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the M2 file: {exc}") from exc
    return parse_m2(text, str(path))


MAX_RUN = 16  # tokens on either side of one changed run searched exhaustively; longer runs are one edit


def _runs(source: tuple[str, ...], hyp: tuple[str, ...]) -> list[tuple[int, int, int, int]]:
    """(source start, source end, answer start, answer end) of each maximal changed run of a
    minimal Levenshtein alignment (matched tokens separate runs)."""
    n, m = len(source), len(hyp)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        cost[i][0] = i
    for j in range(m + 1):
        cost[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            same = source[i - 1] == hyp[j - 1]
            cost[i][j] = min(cost[i - 1][j - 1] + (0 if same else 1), cost[i - 1][j] + 1, cost[i][j - 1] + 1)
    matched: list[tuple[int, int]] = []  # back-trace the matched token pairs
    i, j = n, m
    while i and j:
        if source[i - 1] == hyp[j - 1] and cost[i][j] == cost[i - 1][j - 1]:
            matched.append((i - 1, j - 1))
            i -= 1
            j -= 1
        elif cost[i][j] == cost[i - 1][j - 1] + 1:
            i -= 1
            j -= 1
        elif cost[i][j] == cost[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    matched.reverse()
    runs = []
    prev_i, prev_j = 0, 0
    for mi, mj in matched + [(n, m)]:
        if (mi, mj) != (prev_i, prev_j):
            runs.append((prev_i, mi, prev_j, mj))
        prev_i, prev_j = mi + 1, mj + 1
    return runs


def system_edits(source: tuple[str, ...], hyp: tuple[str, ...], gold: tuple[GoldEdit, ...]) -> list[Edit]:
    """The system's edits: each changed run read, of all its segmentations into edits (the edit
    lattice of the run), as the one that matches the most gold edits, then has the fewest edits."""
    out: list[Edit] = []
    for s, e, hs, he in _runs(source, hyp):
        if e - s > MAX_RUN or he - hs > MAX_RUN:
            out.append((s, e, hyp[hs:he]))
            continue
        best: dict[tuple[int, int], tuple[int, int, list[Edit]]] = {(s, hs): (0, 0, [])}
        for i in range(s, e + 1):
            for j in range(hs, he + 1):
                if (i, j) == (s, hs):
                    continue
                choice = None
                for i0 in range(s, i + 1):
                    for j0 in range(hs, j + 1):
                        prev = best.get((i0, j0))
                        if prev is None or (i0, j0) == (i, j):
                            continue
                        if source[i0:i] == hyp[j0:j]:
                            score = prev
                        else:
                            edit = (i0, i, hyp[j0:j])
                            hit = any(g.matches(edit, source) for g in gold)
                            score = (prev[0] - hit, prev[1] + 1, prev[2] + [edit])
                        if choice is None or score[:2] < choice[:2]:
                            choice = score
                if choice is not None:  # never None: (s, hs) precedes every (i, j)
                    best[(i, j)] = choice
        out += best[(e, he)][2]
    return out


def _counts(edits: list[Edit], gold: tuple[GoldEdit, ...], source: tuple[str, ...]) -> tuple[int, int, int]:
    tp = sum(1 for e in edits if any(g.matches(e, source) for g in gold))
    matched_gold = sum(1 for g in gold if any(g.matches(e, source) for e in edits))
    return tp, len(edits) - tp, len(gold) - matched_gold


def score(sentences: list[M2Sentence], hypotheses: list[str], *, beta: float = 0.5) -> M2Score:
    """Corpus P / R / F_beta of the corrected sentences (whitespace-tokenized) against the gold edits."""
    if len(hypotheses) != len(sentences):
        raise UsageError(f"{len(hypotheses)} answers for {len(sentences)} M2 sentences: give one per sentence")
    tp = fp = fn = 0
    for sentence, hyp in zip(sentences, hypotheses):
        tokens = tuple(hyp.split())
        candidates: list[tuple[tuple[float, int], tuple[int, int, int]]] = []
        for gold in sentence.annotators or ((),):  # no annotator: no gold edits, as parse_m2 reads it
            c = _counts(system_edits(sentence.source, tokens, gold), gold, sentence.source)
            total = (tp + c[0], fp + c[1], fn + c[2])
            f = M2Score(*total, beta=beta).f
            candidates.append(((f, -(c[1] + c[2])), total))  # best F on the running totals, then the fewest errors
        tp, fp, fn = max(candidates, key=lambda candidate: candidate[0])[1]  # the first of equal ones
    return M2Score(tp, fp, fn, beta=beta)
