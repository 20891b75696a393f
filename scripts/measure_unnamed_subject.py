"""Which answer sentences name a subject no document names, by the answer's outcome.

Replays the rule of `answer.subject.unnamed_subject` (with the corpus the set was run on)
over the sentences of recorded `eval qa` runs: every sentence CRAG's check judged (shown or
not) and every sentence of plain RAG's answers, which nothing checked. A rule worth taking
flags invented answers and no right one.

    python scripts/measure_unnamed_subject.py --db formats.db --records formats-answers.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from crag_edge.answer.subject import unnamed_subject
from crag_edge.grading.keywords import tokenize
from crag_edge.groups import CorpusView
from crag_edge.retrieval.lexical import mentions
from crag_edge.sentences import sentence_spans
from crag_edge.store.factory import open_corpus

SILENT = ("repeat", "meta")  # the check's verdicts on sentences that say nothing of their own


def sentences(record: dict[str, Any]) -> list[str]:
    """The sentences of one recorded answer: those CRAG's check judged, or plain RAG's."""
    if record["system"] == "crag":
        judged = (record.get("support") or {}).get("sentences", [])
        return [s["text"] for s in judged if s["checked_by"] not in SILENT]
    return [record["answer"][a:b] for a, b in sentence_spans(record["answer"])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="the corpus the set ran on")
    parser.add_argument("--records", type=Path, nargs="+", required=True)
    args = parser.parse_args()
    corpus = open_corpus(args.db, readonly=True)
    view = CorpusView.everything()
    counts: Counter[tuple[str, str, bool]] = Counter()
    for path in args.records:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            held = set(tokenize(" ".join(text for _, _, text in record["passages"])))
            for sentence in sentences(record):
                found = unnamed_subject(
                    sentence, record["question"], held, lambda w: mentions(corpus, w, view)
                )
                counts[(record["system"], record["outcome"], bool(found))] += 1
                if found:
                    print(f"{record['system']} {record['outcome']} {found}: {sentence[:100]}")
    for (system, outcome, flagged), n in sorted(counts.items()):
        print(f"{system:6} {outcome:22} {'flagged' if flagged else 'kept':8} {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
