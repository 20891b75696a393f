"""Which answer sentences name a subject no document names, by the answer's outcome.

Replays the rule of `answer.subject.unnamed_subject` (with the corpus the set was run on)
over the sentences of recorded `eval qa` runs: every sentence CRAG's check judged (shown or
not) and every sentence of plain RAG's answers, which nothing checked; or over the labelled
sentences of one corpus, each with its one passage. A rule worth taking flags invented
answers and unstated sentences, and no right answer or stated sentence.

    python scripts/measure_unnamed_subject.py --db formats.db --records formats-answers.jsonl
    python scripts/measure_unnamed_subject.py --db git-doc.db \
        --labels docs/data/support-labels.jsonl --set git-doc
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator
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


def recorded(paths: list[Path]) -> Iterator[tuple[str, str, str, str, list[str]]]:
    """Each sentence of the records, with its system, outcome, question and passages."""
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            passages = [text for _, _, text in record["passages"]]
            for sentence in sentences(record):
                yield sentence, record["system"], record["outcome"], record["question"], passages


def labelled(labels: Path, corpus_set: str) -> Iterator[tuple[str, str, str, str, list[str]]]:
    """The labelled sentences of one corpus, each with its label and its one passage."""
    for line in labels.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if "passage" in item and item["set"] == corpus_set:
            yield item["sentence"], "label", item["label"], item["question"], [item["passage"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="the corpus the set ran on")
    parser.add_argument("--records", type=Path, nargs="+", default=[])
    parser.add_argument("--labels", type=Path, help="labelled sentences (with --set)")
    parser.add_argument("--set", dest="corpus_set", help="the labels' corpus, e.g. git-doc")
    args = parser.parse_args()
    corpus = open_corpus(args.db, readonly=True)
    view = CorpusView.everything()
    items = list(recorded(args.records))
    if args.labels is not None:
        items += labelled(args.labels, args.corpus_set)
    counts: Counter[tuple[str, str, bool]] = Counter()
    for sentence, system, outcome, question, passages in items:
        held = set(tokenize(" ".join(passages)))
        found = unnamed_subject(sentence, question, held, lambda w: mentions(corpus, w, view))
        counts[(system, outcome, bool(found))] += 1
        if found:
            print(f"{system} {outcome} {found}: {sentence[:100]}")
    for (system, outcome, flagged), n in sorted(counts.items()):
        print(f"{system:6} {outcome:22} {'flagged' if flagged else 'kept':8} {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
