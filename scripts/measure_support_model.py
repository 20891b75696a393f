"""ROC-AUC of the support model: on held-out training pairs, and on sentences read by hand.

Held-out pairs: the pairs of `scripts/support_pairs.py` that `scripts/train_support_model.py`
held out with the same `--heldout-corpus` (whole corpora, and SciFact's held-out claims),
scored as trained (one window per pair), by corpus and by recipe.

Labelled sentences (`docs/data/support-labels.jsonl`, stated or not by the context their
answer was written from): the `eval qa` records that held each answer's passages are not
kept, so each sentence's context is rebuilt as the question's top `--top-k` hybrid hits on its
corpus (`--db SET=corpus.db`, questions from `--questions SET=qa.jsonl`). A sentence's score
is its best passage's (windows as the runtime reads them). Beside it, on the same contexts:
whether the support check's cheap tier locates the sentence in a passage with no number or
name missing (`answer.support.term_support`), and the best passage's share of its terms.

    python scripts/measure_support_model.py --model crag_edge/shipped_models/support_model \\
        --pairs support-pairs.jsonl --heldout-corpus git-doc \\
        --labels docs/data/support-labels.jsonl \\
        --db git-doc=git-doc.db --db sqlite-doc=sqlite-doc.db --db formats=formats.db \\
        --questions git-doc=docs/data/git-doc-qa.jsonl \\
        --questions sqlite-doc=docs/data/sqlite-doc-qa.jsonl \\
        --questions formats=docs/data/formats-qa.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from crag_edge.answer.support import claim_text, term_support
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading.auc import roc_auc
from crag_edge.groups import CorpusView
from crag_edge.models.onnx_session import plain_tokenizer
from crag_edge.models.provision import EMBEDDER_ONNX_INT8
from crag_edge.models.support_model import MAX_LENGTH, SupportModel
from crag_edge.result import ContextItem
from crag_edge.training.export import onnx_logits
from crag_edge.training.support_data import is_heldout

EVERYTHING = CorpusView.everything()  # the owner's view: every document


def auc(scores: list[float], labels: list[bool]) -> float | None:
    if len(set(labels)) < 2:
        return None
    return round(roc_auc(scores, [int(x) for x in labels]), 3)


def heldout_pairs(args: argparse.Namespace) -> dict[str, Any]:
    """AUC of the held-out pairs, overall, by corpus and by recipe."""
    rows = [json.loads(line) for line in args.pairs.open(encoding="utf-8")]
    rows = [r for r in rows if is_heldout(r["corpus"], r["unit"], args.heldout_corpus)]
    tokenizer = plain_tokenizer(args.model / "tokenizer.json")
    tokenizer.enable_truncation(MAX_LENGTH, strategy="longest_first")
    encodings = tokenizer.encode_batch([(r["query"], r["passage"]) for r in rows])
    logits = onnx_logits(args.model / EMBEDDER_ONNX_INT8, encodings, threads=2).tolist()
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[r["corpus"]].append(i)
        groups[f"{r['corpus']} / {r['origin']}"].append(i)
    table = {"all": {"pairs": len(rows), "auc": auc(logits, [r["label"] >= 0.5 for r in rows])}}
    for name, rows_in in sorted(groups.items()):
        labels = [rows[i]["label"] >= 0.5 for i in rows_in]
        table[name] = {
            "pairs": len(rows_in),
            "stated": sum(labels),
            "auc": auc([logits[i] for i in rows_in], labels),
            "mean_p": round(
                sum(1 / (1 + 2.718281828 ** -logits[i]) for i in rows_in) / len(rows_in), 3
            ),
        }
    return table


def contexts(args: argparse.Namespace) -> dict[str, tuple[str, list[ContextItem]]]:
    """(question, its top hits as a context) per labelled question id."""
    settings = Settings.load()
    dbs = dict(pair.split("=", 1) for pair in args.db)
    out: dict[str, tuple[str, list[ContextItem]]] = {}
    for name, path in (pair.split("=", 1) for pair in args.questions):
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        questions = [json.loads(line) for line in lines if line.strip()]
        with Engine.open(Path(dbs[name]), settings, readonly=True) as engine:
            for q in questions:
                hits = engine.retriever.search(
                    q["question"], top_k=args.top_k, mode="hybrid", view=EVERYTHING
                )
                items = [
                    ContextItem(n, n, 0, h.chunk.title, "", 0, 0, h.chunk.text, "corpus", 1.0)
                    for n, h in enumerate(hits, 1)
                ]
                out[f"{name}:{q['id']}"] = (q["question"], items)
    return out


def labelled(args: argparse.Namespace) -> dict[str, Any]:
    """AUC of stated against the rest on the labelled sentences, in rebuilt contexts."""
    model = SupportModel(
        args.model / EMBEDDER_ONNX_INT8, args.model / "tokenizer.json", "support", threads=2
    )
    found = contexts(args)
    rows = []
    for line in args.labels.open(encoding="utf-8"):
        label = json.loads(line)
        if "passage" in label:  # an item checked against its own passage
            continue
        question, context = found[f"{label['set']}:{label['question_id']}"]
        claim = claim_text(label["sentence"])
        terms = term_support(label["sentence"], context, None, question)
        rows.append({
            "set": label["set"],
            "stated": label["stated"],
            "model": max(model.scores(claim, [c.text for c in context], "", question)),
            "located": float(bool(terms.located) and not terms.missing),
            "share": terms.best()[1],
        })  # fmt: skip
    table = {}
    for name in ["all", *sorted({r["set"] for r in rows})]:
        rows_in = [r for r in rows if name in ("all", r["set"])]
        labels = [r["stated"] for r in rows_in]
        table[name] = {"sentences": len(rows_in), "stated": sum(labels)} | {
            signal: auc([r[signal] for r in rows_in], labels)
            for signal in ("model", "located", "share")
        }
    if args.scores:
        args.scores.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the model's folder")
    parser.add_argument("--pairs", type=Path)
    parser.add_argument("--heldout-corpus", action="append", default=[])
    parser.add_argument("--labels", type=Path)
    parser.add_argument("--db", action="append", default=[], help="SET=corpus.db")
    parser.add_argument("--questions", action="append", default=[], help="SET=qa.jsonl")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--scores", type=Path, help="write each labelled sentence's scores")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    if args.pairs:
        report["heldout_pairs"] = heldout_pairs(args)
    if args.labels:
        report["labelled_sentences"] = labelled(args)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
