"""Free-form answers on a real documentation corpus: plain top-k RAG against CRAG, same LLM.

Each question line is `{"question": ..., "answers": [phrase, ...]}` (answerable: right when
the answer contains one of the phrases and does not refuse) or `{"answers": null}` (not in
the corpus: right when the answer refuses, i.e. says the evidence is insufficient). Both
systems use the generator's own call (`generation.answer_reply`): plain RAG on the top-k
whole chunks, CRAG on the loop's final context (no model call when nothing is trustworthy).
Every answer is written to `--records` for reading: the phrase check cannot see invented
details, a reader can.

    python scripts/measure_doc_answers.py --db git-doc.db \
        --questions docs/data/git-doc-questions.jsonl --records answers.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from crag_edge.answer.generation import answer_reply
from crag_edge.engine import Engine
from crag_edge.result import ContextItem

REFUSAL = re.compile(r"insufficient|not enough (information|evidence)", re.IGNORECASE)


def contains(answer: str, phrase: str) -> bool:
    """Case-insensitive, from the start of a word ("zip" is not in "gzip"; "negat" is in
    "negates"); an option such as `-d` must stand alone (not inside `--dry-run`)."""
    after = r"(?![\w-])" if phrase.startswith("-") else ""
    pattern = rf"(?<![\w-]){re.escape(phrase)}{after}"
    return re.search(pattern, answer, re.IGNORECASE) is not None


def right(answer: str, phrases: list[str] | None) -> bool:
    refused = REFUSAL.search(answer) is not None
    if phrases is None:
        return refused
    return not refused and any(contains(answer, p) for p in phrases)


def plain_answer(engine: Engine, question: str) -> tuple[str, list[str]]:
    hits = engine.search(question)
    context = [
        ContextItem(n, h.chunk.chunk_id, h.chunk.doc_id, h.chunk.source, h.chunk.title,
                    h.chunk.start, h.chunk.end, h.chunk.text, "search", h.score)
        for n, h in enumerate(hits, start=1)
    ]  # fmt: skip
    llm = engine.llm_factory()
    if llm is None:
        raise SystemExit("no LLM installed: run `crag-edge models pull`")
    reply = answer_reply(llm, question, context)  # as CRAG's: same prompt and bounds
    text = "".join(reply).strip()
    return text, [reply.finish_reason]


def crag_answer(engine: Engine, question: str) -> tuple[str, list[str]]:
    result, stream = engine.answer(question)
    text = "".join(stream).strip()
    notes = [str(result.decision), result.stop_reason, f"{result.iterations} rounds"]
    return text, [*notes, stream.finish_reason]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--records", type=Path, required=True, help="answers JSONL (appended)")
    parser.add_argument("--systems", default="plain,crag")
    args = parser.parse_args()
    questions = [json.loads(line) for line in args.questions.read_text().splitlines() if line]
    systems = {"plain": plain_answer, "crag": crag_answer}
    chosen = [s for s in args.systems.split(",") if s]
    totals: dict[str, dict[str, Any]] = {
        s: {"answerable_right": 0, "unanswerable_refused": 0, "seconds": 0.0} for s in chosen
    }
    with Engine.open(args.db, readonly=True) as engine, args.records.open("a") as records:
        for item in questions:
            for system in chosen:
                started = time.perf_counter()
                text, notes = systems[system](engine, item["question"])
                seconds = time.perf_counter() - started
                ok = right(text, item["answers"])
                key = "unanswerable_refused" if item["answers"] is None else "answerable_right"
                totals[system][key] += int(ok)
                totals[system]["seconds"] += seconds
                record = {"system": system, **item, "answer": text, "right": ok,
                          "notes": notes, "seconds": round(seconds, 1)}  # fmt: skip
                records.write(json.dumps(record, ensure_ascii=False) + "\n")
                records.flush()
                print(f"{system:5} {'ok ' if ok else 'NO '} {seconds:5.1f}s {item['question']}",
                      file=sys.stderr)  # fmt: skip
    answerable = sum(1 for q in questions if q["answers"] is not None)
    for row in totals.values():
        row["answerable"] = answerable
        row["unanswerable"] = len(questions) - answerable
        row["seconds_per_question"] = round(row.pop("seconds") / len(questions), 1)
    print(json.dumps(totals, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
