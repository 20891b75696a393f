"""What bm25 ranking loses or gains when a caller with groups is ranked by the statistics of
its own view (document frequencies, corpus size and mean length over the documents it may
see) instead of the whole corpus's (docs/service.md, "Lexical scores").

SciFact's abstracts go to groups at random (seeded); a caller sees one group's share. Both
rankings use the corpus's own FTS5 table definition and query builder: "whole" searches an
index of every abstract and keeps the visible ones (as the filtered search did), "view"
searches an index of the visible abstracts only, which is exactly what per-view statistics
compute. nDCG@10 and recall@100 against the train qrels, counting only visible abstracts and
the queries with at least one visible relevant abstract.

    python scripts/measure_view_bm25.py ../shared/data/scifact [--share 0.5 0.2] [--seed 7] \
        [--timing]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterable
from pathlib import Path

import apsw

from crag_edge.evaluation.beir import judged_queries
from crag_edge.evaluation.metrics import ndcg_at, recall_at
from crag_edge.retrieval.lexical import query_terms
from crag_edge.store.sqlite import lexical_view

FTS = (
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(title, text, content = '', contentless_delete = 1, "
    "tokenize = 'porter unicode61 remove_diacritics 2')"
)


def index(documents: Iterable[tuple[int, str, str]]) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(FTS)
    with conn:
        conn.executemany("INSERT INTO chunks_fts (rowid, title, text) VALUES (?, ?, ?)", documents)
    lexical_view.register(conn)
    return conn


def ranked(conn: apsw.Connection, query: str, seen: set[int] | None, limit: int = 100) -> list[int]:
    """The best `limit` rows for `query` among `seen` (None: all), by this index's bm25."""
    rows = conn.execute(
        "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank", (query,)
    )
    found = (int(row[0]) for row in rows)
    return [i for i in found if seen is None or i in seen][:limit]


def timings(every: apsw.Connection, seen: set[int], searches: list[list[str]]) -> None:
    """Milliseconds per search of the top 20 visible rows: the whole corpus's bm25 behind the
    filter as `+rowid IN` (the filter as it is written) and as `rowid IN` (as it was, on a
    few queries only), and the view's own bm25 (`store.sqlite.lexical_view`)."""
    every.execute("CREATE TEMP TABLE IF NOT EXISTS seen (id INTEGER PRIMARY KEY)")
    with every:
        every.execute("DELETE FROM temp.seen")
        every.executemany("INSERT INTO temp.seen VALUES (?)", [(i,) for i in seen])
    visible = (" AND +rowid IN (SELECT id FROM temp.seen)", ())
    totals = lexical_view.read_totals(every, visible)

    def whole(terms: list[str], column: str = "+rowid") -> object:
        sql = f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND {column} IN temp.seen"
        expression = lexical_view.match_expression(terms)
        return every.execute(f"{sql} ORDER BY rank LIMIT 20", (expression,)).fetchall()

    ways = {
        "whole statistics, +rowid IN": (whole, searches),
        "whole statistics, rowid IN": (lambda t: whole(t, "rowid"), searches[:5]),
        "view statistics": (
            lambda t: lexical_view.search_view(every, t, 20, visible, totals),
            searches,
        ),
    }
    for name, (search, asked) in ways.items():
        started = time.perf_counter()
        for terms in asked:
            search(terms)
        per_query = (time.perf_counter() - started) / len(asked) * 1000
        print(f"  {name}: {per_query:.1f} ms per query ({len(asked)} queries)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scifact", type=Path)
    parser.add_argument("--share", type=float, nargs="+", default=[0.5, 0.2])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timing", action="store_true", help="also time 100 searches")
    args = parser.parse_args()
    lines = (args.scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines]
    queries, qrels = judged_queries(
        args.scifact / "queries.jsonl", args.scifact / "qrels" / "train.tsv"
    )
    every = index((i, d.get("title") or "", d["text"]) for i, d in enumerate(docs))
    ids = [d["_id"] for d in docs]
    for share in args.share:
        rng = random.Random(args.seed)
        seen = {i for i in range(len(docs)) if rng.random() < share}
        view = index((i, docs[i].get("title") or "", docs[i]["text"]) for i in sorted(seen))
        visible_ids = {ids[i] for i in seen}
        totals = {"whole": [0.0, 0.0], "view": [0.0, 0.0]}
        asked = changed = 0
        for qid, text in queries.items():
            relevant = {d: g for d, g in qrels[qid].items() if d in visible_ids}
            terms = query_terms(text)
            if not relevant or not terms:
                continue
            expression = lexical_view.match_expression(terms)
            asked += 1
            whole = [ids[i] for i in ranked(every, expression, seen)]
            own = [ids[i] for i in ranked(view, expression, None)]
            changed += whole[:10] != own[:10]
            for name, result in (("whole", whole), ("view", own)):
                totals[name][0] += ndcg_at(result, relevant, 10)
                totals[name][1] += recall_at(result, relevant, 100)
        print(
            f"share {share:.0%}: {len(seen)} of {len(docs)} abstracts visible, {asked} queries, "
            f"top 10 changed for {changed}"
        )
        for name, (ndcg, recall) in totals.items():
            ndcg, recall = ndcg / asked, recall / asked
            print(f"  {name:5} statistics: nDCG@10 {ndcg:.4f}  recall@100 {recall:.4f}")
        if args.timing:
            timings(every, seen, [t for t in map(query_terms, list(queries.values())[:100]) if t])


if __name__ == "__main__":
    main()
