"""M2 precision, recall and F0.5 of a system's corrections against gold edits in M2 format.

M2 (the CoNLL-2014 format): a block per sentence, `S` and the tokenized source, then one `A` line
per gold edit, `A start end|||type|||correction|||REQUIRED|||-NONE-|||annotator`, where start and
end are token offsets into the source, the correction may list alternatives separated by `||`,
`-NONE-` (or empty) deletes, and `-1 -1|||noop` says that annotator made no edit. Tokens are what
the file says they are (split on whitespace): no tokenizer model.

Scoring as the NUS M2 scorer (m2scorer.py, CoNLL-2014) counts it, re-implemented from its published
algorithm (docs/decisions/0502-m2-as-the-scorer-counts-it.md): the edit lattice of both token
Levenshtein alignments (substitution cost 1 and 2), with transitive arcs joining consecutive
changes into one edit spanning at most MAX_UNCHANGED (2) unchanged tokens; per annotator a gold
edit's arc weighs -len(arcs) and any other edit 1 + EPSILON per step, and the lightest path
(Bellman-Ford, ties as the scorer's order breaks them) is the system's edits; an edit is correct
when its span, source text and correction equal a gold edit's (any alternative), matched left to
right. Per sentence the annotator that gives the best F on the running totals (then the most
correct, then the fewest proposed + beta^2 gold) is chosen. Corpus totals: P = TP / (TP + FP) (1
with no system edit), R = TP / (TP + FN) (1 with no gold edit), F_beta = (1 + b^2) P R / (b^2 P + R).
Answers are first tokenized as the gold source is (`tokenize`: "day." -> "day ."); the scorer
itself only splits on whitespace (`tokenized=True`).
"""

from __future__ import annotations

import re
from pathlib import Path

from opsctl.errors import UsageError
from opsctl.model import Model

class GoldEdit(Model):
    start: int
    end: int
    corrections: tuple[tuple[str, ...], ...]  # alternatives


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


MAX_UNCHANGED = 2  # unchanged tokens one system edit may span (the M2 scorer's --max_unchanged_words default)
EPSILON = 0.001  # the extra weight of a system edit that matches no gold edit
_Vertex = tuple[int, int]
_Arc = tuple[_Vertex, _Vertex]
# (kind, start, end, original, correction, unchanged tokens): kind ins | del | sub | noop
_Step = tuple[str, int, int, str, str, int]


def _lattice(source: tuple[str, ...], hyp: tuple[str, ...], sub_cost: int) -> dict[_Vertex, list[tuple[_Vertex, _Step]]]:
    """Every minimal-cost predecessor of each cell of the token Levenshtein matrix (insert and delete
    cost 1, substitute `sub_cost`), in the order substitution-or-match, deletion, insertion."""
    n, m = len(source), len(hyp)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    back: dict[_Vertex, list[tuple[_Vertex, _Step]]] = {}
    for i in range(1, n + 1):
        cost[i][0] = i
        back[(i, 0)] = [((i - 1, 0), ("del", i - 1, i, source[i - 1], "", 0))]
    for j in range(1, m + 1):
        cost[0][j] = j
        back[(0, j)] = [((0, j - 1), ("ins", 0, 0, "", hyp[j - 1], 0))]  # before the first token
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            same = source[i - 1] == hyp[j - 1]
            diagonal = cost[i - 1][j - 1] + (0 if same else sub_cost)
            deletion, insertion = cost[i - 1][j] + 1, cost[i][j - 1] + 1
            best = min(diagonal, deletion, insertion)
            cost[i][j] = best
            here = back.setdefault((i, j), [])
            if diagonal == best:
                here.append(((i - 1, j - 1), ("noop", i - 1, i, source[i - 1], hyp[j - 1], 1) if same
                             else ("sub", i - 1, i, source[i - 1], hyp[j - 1], 0)))
            if deletion == best:
                here.append(((i - 1, j), ("del", i - 1, i, source[i - 1], "", 0)))
            if insertion == best:
                here.append(((i, j - 1), ("ins", i, i, "", hyp[j - 1], 0)))
    return back


def _graph(back, end: _Vertex) -> tuple[list[_Vertex], list[_Arc], dict[_Arc, _Step]]:
    """The vertices on minimal paths (breadth first from the end), their arcs (each arc once per
    lattice) and each arc's step."""
    vertices: list[_Vertex] = []
    arcs: list[_Arc] = []
    steps: dict[_Arc, _Step] = {}
    queue, seen = [end], set()
    while queue:
        v = queue.pop(0)
        if v in seen:
            continue
        seen.add(v)
        vertices.append(v)
        for prev, step in back.get(v, ()):
            arcs.append((prev, v))
            steps[(prev, v)] = step
            if prev not in queue:
                queue.append(prev)
    return vertices, arcs, steps


def _merge(a: _Step, b: _Step) -> _Step:
    """Two adjacent steps read as one edit (source and correction text joined with a space)."""
    orig = " ".join(t for t in (a[3], b[3]) if t) if a[0] != "ins" or b[0] != "ins" else ""
    corr = " ".join(t for t in (a[4], b[4]) if t)
    kind = "noop" if a[0] == b[0] == "noop" else ("ins" if a[0] == b[0] == "ins" else
                                                 "del" if a[0] == b[0] == "del" else "sub")
    return (kind, a[1], b[2], orig, corr, a[5] + b[5])


def _edit_graph(source: tuple[str, ...], hyp: tuple[str, ...], max_unchanged: int):
    """The M2 scorer's edit lattice: both Levenshtein lattices (substitution cost 1 and 2) merged,
    then transitive arcs: two consecutive arcs read as one edit when it spans at most
    `max_unchanged` unchanged tokens (noop chains themselves dropped)."""
    end = (len(source), len(hyp))
    v1, e1, s1 = _graph(_lattice(source, hyp, 1), end)
    v2, e2, s2 = _graph(_lattice(source, hyp, 2), end)
    vertices = sorted(set(v1) | set(v2))
    arcs = sorted(e1 + e2)  # an arc of both lattices is listed twice, as the scorer lists it
    steps = {**s2, **s1}
    dist: dict[_Arc, float] = {a: 1 for a in arcs}
    into: dict[_Vertex, set[_Vertex]] = {}
    out: dict[_Vertex, set[_Vertex]] = {}
    for a, b in arcs:
        out.setdefault(a, set()).add(b)
        into.setdefault(b, set()).add(a)
    order = {v: i for i, v in enumerate(vertices)}
    inf = float("inf")
    for k in vertices:
        for i in sorted(into.get(k, ()), key=order.__getitem__):
            for j in sorted(out.get(k, ()), key=order.__getitem__):
                through = dist[(i, k)] + dist[(k, j)]
                if through < dist.get((i, j), inf):
                    merged = _merge(steps[(i, k)], steps[(k, j)])
                    if merged[5] <= max_unchanged:
                        arcs.append((i, j))
                        dist[(i, j)] = through
                        steps[(i, j)] = merged
                        out.setdefault(i, set()).add(j)
                        into.setdefault(j, set()).add(i)
    # transitive noop arcs are removed as the scorer removes them: while walking the list, so the arc
    # after each removed one is not looked at (and stays)
    index = 0
    while index < len(arcs):
        arc = arcs[index]
        if steps[arc][0] == "noop" and dist[arc] > 1:
            arcs.remove(arc)
            dist[arc] = inf
            del steps[arc]
        index += 1
    return vertices, arcs, dist, steps


_Gold = tuple[int, int, str, tuple[str, ...]]  # (start, end, original, corrections) as the scorer reads them


def _gold_tuples(gold: tuple[GoldEdit, ...], source: tuple[str, ...]) -> list[_Gold]:
    return [(g.start, g.end, " ".join(source[g.start:g.end]), tuple(" ".join(c) for c in g.corrections))
            for g in gold]


def _hits(step: _Step, gold: _Gold) -> bool:
    return step[1] == gold[0] and step[2] == gold[1] and step[3] == gold[2] and step[4] in gold[3]


def _weights(arcs: list[_Arc], dist: dict[_Arc, float], steps: dict[_Arc, _Step], gold: list[_Gold]) -> dict[_Arc, float]:
    """An arc that is a gold edit weighs -len(arcs); any other edit EPSILON more than its length.
    Parallel insertions at one position are matched to the gold insertions there from both ends
    inwards, each gold insertion used once, as the scorer does."""
    weight = dict(dist)
    by_span: dict[tuple[int, int], list[_Arc]] = {}
    golds: dict[tuple[int, int], list[_Gold]] = {}
    for arc in arcs:
        by_span.setdefault((steps[arc][1], steps[arc][2]), []).append(arc)
    for g in gold:
        golds.setdefault((g[0], g[1]), []).append(g)
    big = -len(arcs)
    for span in sorted(by_span):
        group = sorted(by_span[span])
        candidates = golds.get(span, [])
        if span[0] != span[1]:
            for arc in group:
                if any(_hits(steps[arc], g) for g in candidates):
                    weight[arc] = big
                elif steps[arc][0] != "noop":
                    weight[arc] += EPSILON
            continue
        left, right, cur = 0, len(group) - 1, 0
        g_left, g_right = 0, len(candidates) - 1
        while left <= right:
            arc = group[cur]
            from_left = cur == left
            order = range(g_left, g_right + 1) if from_left else reversed(range(g_left, g_right + 1))
            hit = None
            for gi in order:
                if _hits(steps[arc], candidates[gi]):
                    hit = gi
                    break
            if hit is None:
                if steps[arc][0] != "noop":
                    weight[arc] += EPSILON
                if from_left:
                    left, cur = left + 1, right
                else:
                    right, cur = right - 1, left
                continue
            weight[arc] = big
            if from_left:
                g_left = hit + 1
                left += 1
                while left < len(group) and group[left][0] != group[cur][1]:
                    weight[group[left]] += EPSILON
                    left += 1
                cur = left
            else:
                g_right = hit - 1
                right -= 1
                while right >= 0 and group[right][1] != group[cur][0]:
                    weight[group[right]] += EPSILON
                    right -= 1
                cur = right
    return weight


def _best_edits(vertices: list[_Vertex], arcs: list[_Arc], weight: dict[_Arc, float],
                steps: dict[_Arc, _Step]) -> list[_Step]:
    """The lightest path from the start to the end (Bellman-Ford over the arcs in their order, a
    strictly lighter path replacing a found one); its edits, left to right, noops left out."""
    inf = float("inf")
    best = {v: inf for v in vertices}
    best[(0, 0)] = 0
    came: dict[_Vertex, _Vertex] = {}
    for _ in range(len(vertices) - 1):
        changed = False
        for arc in arcs:
            a, b = arc
            if best[a] + weight[arc] < best[b]:
                best[b] = best[a] + weight[arc]
                came[b] = a
                changed = True
        if not changed:
            break
    edits: list[_Step] = []
    v = vertices[-1]
    while v in came:
        prev = came[v]
        step = steps[(prev, v)]
        if step[0] != "noop":
            edits.append(step)
        v = prev
    edits.reverse()
    return edits


def _matched(edits: list[_Step], gold: list[_Gold]) -> int:
    """System edits matching gold edits, left to right, each match moving past the gold edit it used."""
    count, after = 0, 0
    for e in edits:
        for gi in range(after, len(gold)):
            if _hits(e, gold[gi]):
                count += 1
                after = gi + 1
    return count


_EDGE = re.compile(r"""^([("'\[{]+)(.+)$""")
_TAIL = re.compile(r"""^(.+?)([,;:!?"')\]}]+)$""")
_CLITIC = re.compile(r"^(.+?)(n't|'s|'re|'ve|'ll|'d|'m)$", re.IGNORECASE)


def tokenize(text: str) -> tuple[str, ...]:
    """The answers' tokens as the gold source's (Penn Treebank style, the CoNLL-2014 tokenization,
    a documented subset): whitespace, then quotes and brackets split off a word's ends, , ; : ! ?
    off its end, the sentence's final period off the last word, and the clitics n't 's 're 've 'll
    'd 'm off the word they end. A gold source written in that tokenization is unchanged by it."""
    words = text.split()
    out: list[str] = []
    for n, word in enumerate(words):
        tail: list[str] = []
        if n == len(words) - 1 and len(word) > 1 and word.endswith(".") and not word.endswith("..."):
            word, tail = word[:-1], ["."]
        while True:
            m = _TAIL.match(word)
            if m is None:
                break
            word = m.group(1)
            tail = list(m.group(2)) + tail
        m = _EDGE.match(word)
        if m is not None:
            out.extend(m.group(1))
            word = m.group(2)
        clitic = _CLITIC.match(word)
        if clitic is not None and clitic.group(1).isalpha():
            out += [clitic.group(1), clitic.group(2)]
        elif word:
            out.append(word)
        out += tail
    return tuple(out)


def score(sentences: list[M2Sentence], hypotheses: list[str], *, beta: float = 0.5,
          max_unchanged: int = MAX_UNCHANGED, tokenized: bool = False) -> M2Score:
    """Corpus P / R / F_beta of the corrected sentences against the gold edits, as the M2 scorer
    counts them. `tokenized`: the answers are already in the gold's tokenization (split on
    whitespace only, as the scorer reads them); else `tokenize` first ("day." -> "day .")."""
    if len(hypotheses) != len(sentences):
        raise UsageError(f"{len(hypotheses)} answers for {len(sentences)} M2 sentences: give one per sentence")
    b2 = beta * beta
    tp = fp = fn = 0
    for sentence, hyp in zip(sentences, hypotheses):
        tokens = tuple(hyp.split()) if tokenized else tokenize(hyp)
        vertices, arcs, dist, steps = _edit_graph(sentence.source, tokens, max_unchanged)
        chosen: tuple[int, int, int] | None = None
        best_f, best_c, best_cost = -1.0, -1, float("inf")
        for annotator in sentence.annotators or ((),):
            gold = _gold_tuples(annotator, sentence.source)
            edits = _best_edits(vertices, arcs, _weights(arcs, dist, steps, gold), steps)
            c = _matched(edits, gold)
            tc, te, tg = tp + c, tp + fp + len(edits), tp + fn + len(gold)
            f = _f_counts(tc, te, tg, beta)
            cost = te + b2 * tg
            if f > best_f or (f == best_f and tc > best_c) or (f == best_f and tc == best_c and cost < best_cost):
                best_f, best_c, best_cost = f, tc, cost
                chosen = (c, len(edits), len(gold))
        assert chosen is not None  # at least one annotator: `or ((),)`
        c, proposed, golds = chosen
        tp, fp, fn = tp + c, fp + proposed - c, fn + golds - c
    return M2Score(tp, fp, fn, beta=beta)


def _f_counts(correct: int, proposed: int, gold: int, beta: float) -> float:
    """The scorer's F of running counts: (1 + b^2) c / (b^2 g + e); with nothing proposed or due, 1
    when nothing is correct (0/0), else 0."""
    denominator = beta * beta * gold + proposed
    if denominator == 0:
        return 1.0 if correct == 0 else 0.0
    return (1 + beta * beta) * correct / denominator
