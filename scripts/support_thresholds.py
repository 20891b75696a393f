"""What the reader would see at each support threshold, from one recorded run.

Run `eval qa --systems crag` once with `support_check = "keep"` and `support_threshold = 1.0`:
every answer is shown as written, and every sentence's check is recorded with both of its
candidate passages asked (none reaches 1.0), so its score is its best passage's P(yes). For
each threshold t this script applies the `remove` rule to those records, as `answer.checked`
does (a sentence shows when its score is at least t and no number or name in it is missing
from the passages, it takes no table row's value without naming the row, and it does not
point back to a sentence that failed (a passage's own
words, quoted, show whatever their score); a repeat, or a
sentence that says nothing of its own or only speaks of the passages, never shows; an
answer left with nothing is refused as `unsupported`), and scores the shown text with
`eval qa`'s own outcome rule. The model's text does not depend on the threshold (greedy
decoding, the check runs after it), so this is what a run at t would show.

    python scripts/support_thresholds.py --questions docs/data/git-doc-qa.jsonl \
        --records git-doc-crag-keep.jsonl --db git-doc.db --thresholds 0.5,0.6,0.7,0.8,0.9
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from crag_edge.answer.pointing import fails_in_place
from crag_edge.answer.support import Mentioned, claim_text, stated, term_support
from crag_edge.answer.table_rows import unnamed_row
from crag_edge.config import AnswerSettings
from crag_edge.evaluation.qa import OUTCOMES, SCORES, outcome, read_questions
from crag_edge.groups import CorpusView
from crag_edge.result import ContextItem
from crag_edge.retrieval.lexical import mentions
from crag_edge.store.factory import open_corpus

EVERYTHING = CorpusView.everything()  # the owner's view: every document


def shown_text(
    record: dict[str, Any], threshold: float, mentioned: Mentioned = None
) -> tuple[str, int, int]:
    """The answer the `remove` rule shows at `threshold`; with the count of sentences shown
    and of sentences removed. `mentioned` as for `term_support` (the corpus's words)."""
    context = [ContextItem(n, n, 0, where, "", 0, 0, text, "corpus", 1.0)
               for n, where, text in record["passages"]]  # fmt: skip
    seen: list[str] = []
    verdicts: list[tuple[str, bool]] = []  # the sentences a reader could see, and their verdict
    located = AnswerSettings().support_threshold_located
    for sentence in record["support"]["sentences"]:
        text = sentence["text"]
        terms = term_support(text, context, mentioned, record["question"])
        scored = None if sentence["passage"] is None else (sentence["passage"], sentence["score"])
        if claim_text(text) not in seen and not terms.meta:
            passed = stated(terms, scored, threshold, located) and not _unnamed(
                record, text, scored
            )
            verdicts.append((text, passed))
        seen.append(claim_text(text))
    for i in fails_in_place(verdicts):
        verdicts[i] = (verdicts[i][0], False)
    shown = [text for text, ok in verdicts if ok]
    return " ".join(shown), len(shown), len(seen) - len(shown)


def _unnamed(record: dict[str, Any], text: str, scored: tuple[int, float] | None) -> bool:
    """Whether the row rule fails a passed sentence (`table_rows.unnamed_row`): it takes a
    table row's value of the passage that passes it without naming the row."""
    texts = {n: text for n, _, text in record["passages"]}
    if scored is None or scored[0] not in texts:
        return False
    return unnamed_row(text, record["question"], texts[scored[0]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--thresholds", default="0.5,0.6,0.7,0.8,0.9,0.95")
    parser.add_argument("--db", help="the corpus the run asked (a name it holds is no miss)")
    args = parser.parse_args()
    corpus = open_corpus(args.db, readonly=True) if args.db else None
    mentioned = None if corpus is None else (lambda word: mentions(corpus, word, view=EVERYTHING))
    questions = {q.question_id: q for q in read_questions(args.questions)}
    records = [json.loads(line) for line in args.records.open(encoding="utf-8")]
    records = [r for r in records if r["system"] == "crag"]
    table = {}
    for threshold in (float(t) for t in args.thresholds.split(",")):
        counts = dict.fromkeys(OUTCOMES, 0)
        shown_total = removed_total = 0
        for record in records:
            question = questions[record["question_id"]]
            if record["support"] and record["support"]["sentences"]:
                text, shown, removed = shown_text(record, threshold, mentioned)
                # The model's own finish: a recorded `unsupported` means it ended on its own.
                model_finish = record["finish_reason"].replace("unsupported", "stop")
                finish = model_finish if shown else "unsupported"
            else:
                text, shown, removed = record["answer"], 0, 0
                finish = record["finish_reason"]
            counts[outcome(question, text, finish)] += 1
            shown_total += shown
            removed_total += removed
        score = sum(SCORES[o] * n for o, n in counts.items()) / max(1, len(records))
        table[threshold] = counts | {
            "truthfulness": round(score, 3),
            "sentences_shown": shown_total,
            "sentences_removed": removed_total,
        }
    print(json.dumps({"questions": len(records), "by_threshold": table}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
