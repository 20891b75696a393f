"""Questions the local LLM wrote for sentences of SciFact abstracts, as evaluator training pairs.

SciFact's human labels pair *claims* with evidence. People ask the engine *questions*: an
evaluator trained on claims alone reads "How does X decide Y?" as it reads a statement and
ranks Wikipedia answer sentences no better than the embedder's cosine. Here the default LLM
writes, for one sentence of each abstract, a short question that the sentence answers
(generative pseudo-labelling), and each question becomes two kinds of pairs:

- sentence level: its sentence 1, up to `SENTENCE_NEGATIVES` other sentences of the same
  abstract 0 (topical, but not the answer: the judgement WikiQA asks for);
- chunk level: the corpus chunks holding the sentence 1, the abstract's other chunks 0, and
  the top `HIT_NEGATIVES` hybrid hits of other abstracts 0 (what the cascade grades).

Abstracts cited by the claims the trainer holds out (`is_validation(human_unit(claim))`)
are never used, so the held-out measurements stay unseen. Writing questions is the slow
part (about a second each on two cores), so they are appended to `--questions` as they come
and a rerun resumes after the last complete line.

    python scripts/scifact_question_pairs.py --db subset.db --data ../shared/data/scifact \\
        --questions questions.jsonl --sentences question_sentences.jsonl \\
        --chunks question_chunks.jsonl

SciFact abstracts: ODC-By 1.0, Wadden et al. 2020. The questions are the LLM's output.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.evaluation.pairs import Pair, write_pairs
from crag_edge.groups import CorpusView
from crag_edge.models.chat_model import ChatModel
from crag_edge.models.llm import load_llm
from crag_edge.sentences import sentence_spans
from crag_edge.training.data import human_unit, is_validation
from crag_edge.types import Chunk

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SYSTEM = "You write the questions people type into a search box."
USER = (
    "Write one short question that the following sentence answers, using its key terms. "
    "Reply with the question only.\n\nSentence: {sentence}"
)
MIN_WORDS, MAX_WORDS = 10, 50
MIN_QUESTION_WORDS = 4
MAX_QUESTION_TOKENS = 40
# A sentence that leans on the one before ("These results ...") asks nothing by itself.
_DEPENDENT = re.compile(r"(These|This|Our|We|Here|In this|In summary|Thus|Together)\b")
_DOC_IDS = re.compile(r"\d+")
SENTENCE_NEGATIVES = 4
HIT_NEGATIVES = 6
SEED = 13
BEIR_PREFIX = "beir:"


@dataclass(frozen=True)
class Question:
    """One written question and the sentence it was written for."""

    source: str
    index: int
    sentence: str
    question: str


def heldout_abstracts(claims: Path) -> set[str]:
    """Ids of every abstract a held-out claim cites or takes evidence from."""
    excluded: set[str] = set()
    with claims.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if is_validation(human_unit(row["claim"])):
                excluded |= set(_DOC_IDS.findall(row["evidence_doc_id"] + row["cited_doc_ids"]))
    return excluded


def abstract_sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text, join_continuations=False)]


def chosen_sentence(source: str, sentences: list[str]) -> int | None:
    """The index of the sentence to ask about, drawn per abstract (stable across reruns)."""
    usable = [
        i
        for i, sentence in enumerate(sentences)
        if MIN_WORDS <= len(sentence.split()) <= MAX_WORDS and not _DEPENDENT.match(sentence)
    ]
    return random.Random(source).choice(usable) if usable else None


def ask(llm: ChatModel, sentence: str) -> str | None:
    """The LLM's question for the sentence, or None when its reply is not a question."""
    reply = llm.chat(
        [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER.format(sentence=sentence)},
        ],
        max_tokens=MAX_QUESTION_TOKENS,
    )
    lines = [line.strip().strip("\"'") for line in reply.text.splitlines() if line.strip()]
    if reply.timed_out or not lines:
        return None
    question = lines[0]
    return (
        question if question.endswith("?") and len(question.split()) >= MIN_QUESTION_WORDS else None
    )


def write_questions(
    sources: list[str], texts: dict[str, str], path: Path, limit: int, settings: Settings
) -> None:
    """Ask for questions until `limit` exist in `path`, appending each as it comes."""
    done = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    asked = {record["source"] for record in done}
    if len(done) >= limit:
        return
    llm = load_llm(settings.models)
    count = len(done)
    with path.open("a", encoding="utf-8") as out:
        for source in sources:
            if count >= limit:
                break
            if source in asked:
                continue
            sentences = abstract_sentences(texts[source])
            index = chosen_sentence(source, sentences)
            question = ask(llm, sentences[index]) if index is not None else None
            if index is None or question is None:
                continue
            record = Question(source, index, sentences[index], question)
            out.write(json.dumps(record.__dict__, ensure_ascii=False) + "\n")
            out.flush()
            count += 1
            print(f"{count}/{limit} {question}", file=sys.stderr, flush=True)


def sentence_pairs(question: Question, sentences: list[str]) -> Iterator[Pair]:
    others = [i for i in range(len(sentences)) if i != question.index]
    drawn = random.Random(question.source).sample(others, min(SENTENCE_NEGATIVES, len(others)))
    for i in [question.index, *drawn]:
        yield Pair(question.question, sentences[i], int(i == question.index))


def chunk_pairs(question: Question, own: list[Chunk], engine: Engine) -> Iterator[Pair]:
    """Chunks holding the sentence 1, the abstract's other chunks and others' hits 0."""
    opening = " ".join(question.sentence.split()[:8])
    labels = [int(opening in " ".join(chunk.text.split())) for chunk in own]
    if not any(labels):
        return
    for chunk, label in zip(own, labels, strict=True):
        yield Pair(question.question, chunk.text, label)
    hits = engine.retriever.search(question.question, top_k=10, mode="hybrid", view=EVERYTHING)[
        :HIT_NEGATIVES
    ]
    for hit in hits:
        if hit.chunk.source != question.source:
            yield Pair(question.question, hit.chunk.text, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="corpus ingested from SciFact")
    parser.add_argument("--data", type=Path, required=True, help="the scifact data folder")
    parser.add_argument("--questions", type=Path, required=True, help="questions JSONL (resumed)")
    parser.add_argument("--sentences", type=Path, required=True, help="sentence pairs to write")
    parser.add_argument("--chunks", type=Path, required=True, help="chunk pairs to write")
    parser.add_argument("--limit", type=int, default=1300, help="questions to write at most")
    args = parser.parse_args()
    settings = Settings.load()
    texts = {}
    with (args.data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            texts[BEIR_PREFIX + doc["_id"]] = doc["text"]
    excluded = heldout_abstracts(args.data / "claims_train.csv")
    with Engine.open(args.db, settings, readonly=True) as engine:
        chunks = engine.corpus.get_chunks(engine.corpus.chunk_ids()).values()
        by_source: dict[str, list[Chunk]] = {}
        for chunk in sorted(chunks, key=lambda c: (c.source, c.ordinal)):
            by_source.setdefault(chunk.source, []).append(chunk)
        sources = sorted(s for s in by_source if s.removeprefix(BEIR_PREFIX) not in excluded)
        random.Random(SEED).shuffle(sources)
        write_questions(sources, texts, args.questions, args.limit, settings)
        questions = [
            Question(**json.loads(line)) for line in args.questions.read_text().splitlines()
        ]
        sentence_level = [
            pair
            for q in questions
            for pair in sentence_pairs(q, abstract_sentences(texts[q.source]))
        ]
        chunk_level = [
            pair for q in questions for pair in chunk_pairs(q, by_source[q.source], engine)
        ]
    write_pairs(sentence_level, args.sentences)
    write_pairs(chunk_level, args.chunks)
    for name, pairs in (("sentences", sentence_level), ("chunks", chunk_level)):
        relevant = sum(p.label for p in pairs)
        print(f"{name}: {len(pairs)} pairs ({relevant} relevant), {len(questions)} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
