"""Training pairs for the retrieval evaluator, drawn from the user's own corpus.

Where the (query, passage, label) pairs come from, per *unit* (one query and its passages):

- human units: every query of a `--labels` file with its labelled passages, plus hard
  negatives mined for it (top hybrid-retrieval hits that are none of its labelled passages);
- corpus units: one chunk as the positive for a pseudo-query, plus hard negatives mined
  from other documents (not for cloze queries, see `_chunk_unit`) and random chunks. The
  pseudo-query is a question the local LLM wrote for the chunk (generative
  pseudo-labelling) when an LLM is used, else the document title (first chunk), or for
  untitled documents one of the chunk's sentences, cut out of the passage (inverse cloze
  task: the model must find the context, not the copy).

With an LLM judge, corpus pairs get soft labels: the mean of the heuristic label and the
judge's calibrated probability, which demotes mined negatives that are in fact relevant.
Labelling is the slow part, so finished units are appended to a JSON Lines file and a
rerun resumes after the last complete line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from crag_edge.evaluation.pairs import Pair
from crag_edge.groups import CorpusView
from crag_edge.retrieval import Retriever
from crag_edge.store import CorpusBackend
from crag_edge.types import Chunk

LABELS_FILE = "labels.jsonl"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_SPACES = re.compile(r"\s+")
MIN_QUERY_WORDS, MAX_QUERY_WORDS = 4, 40
MIN_PASSAGE_WORDS = 20
VALIDATION_SHARE = 10  # one unit in this many is held out for validation
RANDOM_NEGATIVES = 2  # unrelated chunks per corpus unit: what an off-topic hit looks like


class LabelStoreError(ValueError):
    """The labels file belongs to another run (other corpus or options)."""


@dataclass(frozen=True)
class TrainPair:
    """One training example; `label` is the target probability of relevance in [0, 1]."""

    query: str
    passage: str
    label: float
    origin: str
    unit: str


@dataclass(frozen=True)
class LabelOptions:
    """How many pairs to draw and how; recorded in the labels file to guard resumes."""

    max_pairs: int = 4000
    negatives: int = 3
    pool: int = 20
    seed: int = 13


class Labeller(Protocol):
    """The local LLM's two jobs: write a question for a passage, judge (query, passage)."""

    @property
    def name(self) -> str: ...

    def question(self, passage: str) -> str | None: ...

    def judge(self, query: str, passages: Sequence[str]) -> list[float]: ...


def is_validation(unit: str) -> bool:
    """Stable split by unit, so the pairs of one query never straddle train and validation."""
    return int(hashlib.sha1(unit.encode("utf-8")).hexdigest(), 16) % VALIDATION_SHARE == 0


def human_unit(query: str) -> str:
    """The unit key of a labelled query: `is_validation` of it says whether the trainer holds
    that query's human pairs out (scripts that make pairs use it to split the same way)."""
    return "human:" + hashlib.sha1(query.encode("utf-8")).hexdigest()[:16]


def normalise(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def pseudo_query(chunk: Chunk) -> tuple[str, str, str] | None:
    """(query, passage, origin) made from the chunk alone, or None if it offers none.

    A title asks for the whole document, so it is used for its first chunk only. Chunks of
    untitled documents get a cloze query instead: one of their sentences, cut out of the
    passage. Not both in one corpus: cloze positives share few words with their query while
    the mined negatives of title units share many, and together they teach the model that
    word overlap means irrelevance (measured in docs/training.md).
    """
    title = chunk.title.strip()
    if MIN_QUERY_WORDS <= len(title.split()) <= MAX_QUERY_WORDS:
        if chunk.ordinal == 0 and normalise(title) not in normalise(chunk.text):
            return title, chunk.text, "title"
        return None
    sentences = _SENTENCE_END.split(chunk.text.strip())
    for index, sentence in enumerate(sentences):
        if index == 0 and chunk.ordinal > 0:
            continue  # a chunk after the first starts mid-sentence: a fragment, not a query
        words = len(sentence.split())
        if sentence[:1].isupper() and MIN_QUERY_WORDS + 2 <= words <= MAX_QUERY_WORDS:
            rest = " ".join(sentences[:index] + sentences[index + 1 :])
            if len(rest.split()) >= MIN_PASSAGE_WORDS:
                return sentence, rest, "sentence"
    return None


class LabelStore:
    """The labels file: a header line with the run's identity, then one line per unit."""

    def __init__(self, path: Path, identity: dict[str, Any]) -> None:
        self.path = path
        self.done: set[str] = set()
        self.pairs: list[TrainPair] = []
        if path.is_file():
            self._load(identity)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"identity": identity}) + "\n", encoding="utf-8")

    def _load(self, identity: dict[str, Any]) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        header = json.loads(lines[0])
        if header.get("identity") != identity:
            raise LabelStoreError(
                f"{self.path} was made by another run ({header.get('identity')}); "
                f"use another --out folder or delete the file to relabel"
            )
        good = len(lines[0]) + 1
        for line in lines[1:]:
            try:
                record = json.loads(line)
            except ValueError:  # a line cut short by an interruption: drop it and later lines
                break
            self.done.add(record["unit"])
            self.pairs.extend(TrainPair(**p) for p in record["pairs"])
            good += len(line) + 1
        if good < len(raw):
            with self.path.open("r+b") as handle:
                handle.truncate(good)

    def add(self, unit: str, pairs: Sequence[TrainPair]) -> None:
        """Append one finished unit; flushed to disk before returning."""
        record = {"unit": unit, "pairs": [asdict(p) for p in pairs]}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.done.add(unit)
        self.pairs.extend(pairs)


class PairBuilder:
    """Builds the units of one corpus; hard negatives come from the project's own retriever."""

    def __init__(
        self,
        corpus: CorpusBackend,
        retriever: Retriever,
        options: LabelOptions,
        labeller: Labeller | None = None,
    ) -> None:
        self.corpus = corpus
        self.retriever = retriever
        self.options = options
        self.labeller = labeller
        self._chunk_ids = corpus.chunk_ids()

    @property
    def chunk_count(self) -> int:
        return len(self._chunk_ids)

    def units(self, human: Sequence[Pair]) -> Iterator[tuple[str, Callable[[], list[TrainPair]]]]:
        """(unit key, a function that labels it), human units first, then corpus chunks in a
        seeded order; the key is stable across runs, so resumes skip finished units."""
        by_query: dict[str, list[Pair]] = {}
        for pair in human:
            by_query.setdefault(pair.query, []).append(pair)
        for query, labelled in by_query.items():
            key = human_unit(query)
            yield key, functools.partial(self._human_unit, key, query, labelled)
        order = list(self._chunk_ids)
        random.Random(self.options.seed).shuffle(order)
        for chunk_id in order:
            key = f"chunk:{chunk_id}"
            yield key, functools.partial(self._chunk_unit, key, chunk_id)

    def _human_unit(self, unit: str, query: str, labelled: Sequence[Pair]) -> list[TrainPair]:
        pairs = [TrainPair(query, p.passage, float(p.label), "human", unit) for p in labelled]
        known = [normalise(p.passage) for p in labelled]

        def is_known(chunk: Chunk) -> bool:
            head = normalise(chunk.text)[:200]
            return any(head in text for text in known)

        for chunk in self._mine(unit, query, is_known):
            pairs.append(TrainPair(query, chunk.text, 0.0, "human-mined", unit))
        return pairs

    def _chunk_unit(self, unit: str, chunk_id: int) -> list[TrainPair]:
        chunk = self.corpus.get_chunks([chunk_id]).get(chunk_id)
        if chunk is None:
            return []
        made = pseudo_query(chunk)
        query, passage, origin = made if made else ("", chunk.text, "")
        if self.labeller is not None:
            question = self.labeller.question(chunk.text)
            if question:
                query, passage, origin = question, chunk.text, "llm-question"
        if not query:
            return []
        rows = [(passage, 1.0, origin)]
        # Retrieval finds passages that share the query's words. A cut-out sentence no longer
        # shares them with its own context, so mined negatives would teach "overlap means
        # irrelevant": cloze units get random negatives only.
        if origin != "sentence":
            for negative in self._mine(unit, query, lambda c: c.doc_id == chunk.doc_id):
                rows.append((negative.text, 0.0, f"{origin}-mined"))
        rng = self._rng(unit, "random")
        for random_id in rng.sample(self._chunk_ids, min(RANDOM_NEGATIVES, len(self._chunk_ids))):
            easy = self.corpus.get_chunks([random_id]).get(random_id)
            if easy is not None and easy.doc_id != chunk.doc_id:
                rows.append((easy.text, 0.0, f"{origin}-random"))
        if self.labeller is not None:
            judged = self.labeller.judge(query, [text for text, _, _ in rows])
            rows = [
                (text, (label + p) / 2, f"{kind}+{self.labeller.name}")
                for (text, label, kind), p in zip(rows, judged, strict=True)
            ]
        return [TrainPair(query, text, label, kind, unit) for text, label, kind in rows]

    def _mine(self, unit: str, query: str, excluded: Callable[[Chunk], bool]) -> list[Chunk]:
        """`negatives` chunks sampled from the top `pool` hybrid hits that are not excluded."""
        if self.options.negatives == 0:
            return []
        hits = self.retriever.search(
            query, top_k=self.options.pool, mode="hybrid", view=CorpusView.everything()
        )
        candidates = [h.chunk for h in hits if not excluded(h.chunk)]
        return self._rng(unit, "mine").sample(
            candidates, min(self.options.negatives, len(candidates))
        )

    def _rng(self, unit: str, purpose: str) -> random.Random:
        """Per unit, so a resumed run draws exactly what an uninterrupted one would have."""
        return random.Random(f"{self.options.seed}:{unit}:{purpose}")


def label_corpus(
    builder: PairBuilder,
    human: Sequence[Pair],
    store: LabelStore,
    *,
    deadline: float,
    on_unit: Callable[[int], None] | None = None,
) -> bool:
    """Label units until `max_pairs` pairs exist or the monotonic `deadline` passes.

    Returns True when labelling is complete (no more pairs wanted or no units left).
    """
    for unit, label in builder.units(human):
        if len(store.pairs) >= builder.options.max_pairs:
            return True
        if unit in store.done:
            continue
        if time.monotonic() > deadline:
            return False
        store.add(unit, label())
        if on_unit:
            on_unit(len(store.pairs))
    return True
