"""How often the answer's context still holds the evidence that grading kept, on a question set.

Each answerable question of a set (`docs/data/<set>-qa.jsonl`) carries `evidence`, a pattern
of the words that state its answer. The corrective loop runs once per question (no answer is
written; model scores come from the corpus file's evaluation cache where a run left them),
and two things are counted: questions whose kept chunks hold the evidence, and questions
whose final context (refined strips within `context_budget_tokens`, or whole chunks on the
fast path) still holds it. The gap is what refinement and the budget lose before the model
reads a word; the questions lost are listed by id, and so are those whose retrieved chunks
held the evidence that grading then discarded. Grading itself is scored too: the ROC-AUC of
every graded hit's final score against whether it holds its question's evidence, and the
decisions the loop reached on the set's off-corpus questions.

`--without-diversity` holds the signals tier's source diversity at 1 for every hit (as in
the pair measurements of docs/grading.md, where each pair is a source of its own), to
measure what the penalty on a page with many hits does.

    python scripts/measure_context_evidence.py --db git-set.db \
        --questions docs/data/git-doc-qa.jsonl --json evidence.json
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading import signals
from crag_edge.grading.auc import roc_auc


def _holds(pattern: re.Pattern[str], texts: list[str]) -> bool:
    return any(pattern.search(" ".join(text.split())) for text in texts)


def _no_diversity(source_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    return np.ones(len(source_ids), dtype=np.float64)


def measure(engine: Engine, questions: list[dict[str, Any]]) -> dict[str, Any]:
    kept_held, context_held, lost, discarded = 0, 0, [], []
    scores: list[float] = []
    relevant: list[int] = []
    off_corpus: Counter[str] = Counter()
    for item in questions:
        result = engine.query(item["question"])
        if not item["in_corpus"]:
            off_corpus[str(result.decision)] += 1
            continue
        pattern = re.compile(item["evidence"], re.IGNORECASE)
        for hit, grade in result.hits:
            scores.append(grade.score)
            relevant.append(int(_holds(pattern, [hit.chunk.text])))
        kept = [hit.chunk.text for hit, grade in result.hits if grade.kept]
        in_context = _holds(pattern, [piece.text for piece in result.context])
        in_kept = _holds(pattern, kept)
        kept_held += in_kept
        context_held += in_context
        if in_kept and not in_context:
            lost.append(item["id"])
        if not in_kept and _holds(pattern, [hit.chunk.text for hit, _ in result.hits]):
            discarded.append(item["id"])
    return {
        "answerable": len(questions) - off_corpus.total(),
        "kept_holds_evidence": kept_held,
        "context_holds_evidence": context_held,
        "lost_by_refinement": lost,
        "discarded_by_grading": discarded,
        "hit_auc": round(roc_auc(scores, relevant), 3),
        "off_corpus_decisions": dict(off_corpus),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    parser.add_argument("--without-diversity", action="store_true")
    args = parser.parse_args()
    if args.without_diversity:
        signals.source_uniqueness = _no_diversity  # type: ignore[assignment]
    lines = args.questions.read_text(encoding="utf-8").splitlines()
    questions = [q for q in map(json.loads, lines) if not q["in_corpus"] or q.get("evidence")]
    with Engine.open(args.db, Settings.load()) as engine:
        report = measure(engine, questions)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
