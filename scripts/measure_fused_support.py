"""Every support signal on the labelled sentences, and a small logistic model fusing them.

Each labelled item of `docs/data/support-labels.jsonl` that carries its passage (a sentence,
the answer sentence before it, the passage it is checked against, the question) is scored by
every signal the support check could read:

- the cheap tier (`answer.support.term_support` on that one passage): located with no fact
  missing, a quote, a number or name missing, the share of its terms, the share of its facts
  (numbers, names, options) the passage holds;
- all-MiniLM-L6-v2's cosine between the sentence and the passage's closest sentence;
- the shipped evaluator's relevance of the passage to the sentence;
- the support model's P(stated) (`--support-model`, read with the question and the
  sentence before it);
- the generator's context reliance: the mean log-probability per token of the sentence after
  the question with the passage, minus without it (`--reliance-model`, a GGUF read with
  llama-cpp-python);
- the judge: the check's own question to the LLM, P(yes) (`--judge-model`).

Scores are written one line per item to `--signals` and read back on the next run, so a slow
judge can be stopped and resumed. `--fit` then fits a logistic model on standardised signals,
leaving one corpus out at a time, and reports each signal's AUC of stated against the rest,
the fused score's, and at a threshold chosen on the training corpora (the highest that
shows `--target-shown` of their stated sentences), the share of stated sentences shown and of
shown sentences that are not stated, on the corpus held out.

    python scripts/measure_fused_support.py --labels docs/data/support-labels.jsonl \\
        --signals signals.jsonl --support-model build/support-model/model/release \\
        --reliance-model models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --judge-model models/qwen2.5-coder-1.5b-instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --fit
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crag_edge.answer.answering import focus_terms
from crag_edge.answer.support import (
    LlmSupport,
    TermSupport,
    claim_text,
    facts,
    held_words,
    refers_back,
    stated,
    term_support,
)
from crag_edge.config import AnswerSettings
from crag_edge.grading.auc import roc_auc
from crag_edge.grading.keywords import tokenize
from crag_edge.models.cross_encoder import OnnxCrossEncoder
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.support_model import SupportModel
from crag_edge.result import ContextItem
from crag_edge.sentences import sentence_spans

ROOT = Path(__file__).resolve().parent.parent
MINILM = ROOT / "models" / "all-minilm-l6-v2"
EVALUATOR = ROOT / "crag_edge" / "shipped_models" / "evaluator"
CHEAP = (
    "addresses",
    "located",
    "quoted",
    "missing",
    "share",
    "fact_share",
    "piece_located",
    "piece_share",
    "previous_share",
)
Scorer = Callable[[dict[str, Any]], dict[str, float]]


def cheap(item: dict[str, Any]) -> dict[str, float]:
    """The check's cheap tier on the item's one passage, and on its sentences (a table's
    rows) one at a time: a fact of another row is in the passage, not in the row."""
    passage = ContextItem(1, 1, 0, item["passage_title"], "", 0, 0, item["passage"], "corpus", 1)
    terms = term_support(item["sentence"], [passage], None, item["question"])
    pieces = passage_pieces(item["passage"])
    in_pieces = term_support(item["sentence"], pieces, None, item["question"])
    stated_facts = facts(claim_text(item["sentence"]))
    held = stated_facts & held_words(item["passage"])
    pointing = bool(item["previous"]) and refers_back(item["sentence"])
    previous = term_support(item["previous"], pieces).best()[1] if pointing else 1.0
    focus = focus_terms(item["question"])
    return {
        "addresses": float(not focus or bool(set(tokenize(claim_text(item["sentence"]))) & focus)),
        "located": float(bool(terms.located) and not terms.missing),
        "quoted": float(terms.quoted is not None),
        "missing": float(bool(terms.missing)),
        "share": terms.best()[1],
        "fact_share": len(held) / len(stated_facts) if stated_facts else 1.0,
        "piece_located": float(bool(in_pieces.located) and not terms.missing),
        "piece_share": in_pieces.best()[1],
        "previous_share": previous,
    }


def passage_pieces(text: str) -> list[ContextItem]:
    """A passage's sentences (each row of a table is one), as numbered context items."""
    spans = sentence_spans(text) or [(0, len(text))]
    return [
        ContextItem(n, n, 0, "", "", a, b, text[a:b], "corpus", 1)
        for n, (a, b) in enumerate(spans, 1)
    ]


def cosine_scorer() -> Scorer:
    embedder = OnnxEmbedder(MINILM / "model.int8.onnx", MINILM / "tokenizer.json", "minilm")

    def score(item: dict[str, Any]) -> dict[str, float]:
        text = item["passage"]
        pieces = [text[a:b] for a, b in sentence_spans(text)] or [text]
        vectors = embedder.embed([claim_text(item["sentence"]), item["question"], *pieces])
        return {
            "cosine": float(np.max(vectors[2:] @ vectors[0])),
            "question_cosine": float(vectors[1] @ vectors[0]),
        }

    return score


def evaluator_scorer() -> Scorer:
    model = OnnxCrossEncoder(
        EVALUATOR / "model.int8.onnx", EVALUATOR / "tokenizer.json", "evaluator", threads=2
    )

    def score(item: dict[str, Any]) -> dict[str, float]:
        return {"evaluator": model.score(claim_text(item["sentence"]), [item["passage"]]).scores[0]}

    return score


def support_model_scorer(folder: Path) -> Scorer:
    model = SupportModel(folder / "model.int8.onnx", folder / "tokenizer.json", "support", 2)

    def score(item: dict[str, Any]) -> dict[str, float]:
        claim, previous = claim_text(item["sentence"]), claim_text(item["previous"])
        read = model.scores(claim, [item["passage"]], previous, item["question"])
        return {"support_model": read[0]}

    return score


def reliance_scorer(gguf: Path) -> Scorer:
    """Mean log-probability per token of the sentence with the passage minus without it.
    One model reads the prompts with the passage, another those without, so that items of
    one passage share its evaluated prefix."""
    with_passage, without = _LogProbs(gguf), _LogProbs(gguf)

    def score(item: dict[str, Any]) -> dict[str, float]:
        answer = f"Answer: {claim_text(item['previous'])} ".replace("Answer:  ", "Answer: ")
        asked = f"Question: {item['question']}\n{answer}"
        sentence = claim_text(item["sentence"])
        read = with_passage.mean(f"Passage: {item['passage']}\n\n{asked}", sentence)
        return {"reliance": read - without.mean(asked, sentence)}

    return score


class _LogProbs:
    """A small GGUF model's mean log-probability of a text after a prompt, reusing the
    evaluated tokens the last call shares with this one."""

    def __init__(self, gguf: Path) -> None:
        from llama_cpp import Llama

        self._llm = Llama(str(gguf), n_ctx=1024, n_threads=1, logits_all=True, verbose=False)

    def mean(self, prompt: str, target: str) -> float:
        llm = self._llm
        head = llm.tokenize(prompt.encode(), add_bos=True)
        tail = llm.tokenize(target.encode(), add_bos=False)
        tokens = head[-(1000 - len(tail)) :] + tail
        start = len(tokens) - len(tail)
        common = 0
        for old, new in zip(llm.input_ids[: llm.n_tokens], tokens[:-1], strict=False):
            if old != new:
                break
            common += 1
        llm.n_tokens = common
        llm.eval(tokens[common:])
        rows = np.asarray(llm.scores[start - 1 : len(tokens) - 1], dtype=np.float64)
        top = rows.max(axis=1, keepdims=True)
        logz = np.log(np.exp(rows - top).sum(axis=1)) + top[:, 0]
        return float(np.mean(rows[np.arange(len(tail)), tail] - logz))


def judge_scorer(gguf: Path) -> Scorer:
    """The check's LLM question on the item's passage, as passage [1] of its context."""
    from crag_edge.models.llm import LlamaRuntime

    judge = LlmSupport(LlamaRuntime(gguf, model_id="judge", n_ctx=2048, n_threads=1, timeout_s=600))

    def score(item: dict[str, Any]) -> dict[str, float]:
        passage = ContextItem(1, 1, 0, item["passage_title"], "", 0, 0, item["passage"], "c", 1)
        statement = claim_text(item["sentence"])
        found = judge.scores([passage], [(statement, 1)], deadline=math.inf)[0]
        return {"judge": math.nan if found is None else found}

    return score


def item_key(item: dict[str, Any]) -> str:
    return json.dumps([item["corpus"], item["sentence"], item["previous"], item["passage"]])


def score_items(args: argparse.Namespace, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every requested signal per item, resumed from and appended to `--signals`."""
    done: dict[str, dict[str, Any]] = {}
    if args.signals.exists():
        for line in args.signals.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done.setdefault(row["key"], {}).update(row)
    scorers: list[tuple[str, Callable[[], Scorer]]] = [
        ("addresses", lambda: cheap),
        ("question_cosine", cosine_scorer),
        ("evaluator", evaluator_scorer),
    ]
    if args.support_model:
        scorers.append(("support_model", lambda: support_model_scorer(args.support_model)))
    if args.reliance_model:
        scorers.append(("reliance", lambda: reliance_scorer(args.reliance_model)))
    if args.judge_model:
        scorers.append(("judge", lambda: judge_scorer(args.judge_model)))
    with args.signals.open("a", encoding="utf-8") as out:
        for name, make in scorers:
            todo = [i for i in items if name not in done.get(item_key(i), {})]
            scorer = make() if todo else None
            for item in todo:
                row = {"key": item_key(item)} | scorer(item)  # type: ignore[misc]
                done.setdefault(row["key"], {}).update(row)
                out.write(json.dumps(row) + "\n")
                out.flush()
    return [done[item_key(i)] | {"corpus": i["corpus"], "stated": i["stated"]} for i in items]


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """Weights (bias last) of an L2-regularised logistic regression, by Newton's method."""
    design = np.hstack([x, np.ones((len(x), 1))])
    weights = np.zeros(design.shape[1])
    penalty = np.diag([l2] * x.shape[1] + [0.0])
    for _ in range(50):
        p = 1 / (1 + np.exp(-design @ weights))
        gradient = design.T @ (p - y) + penalty @ weights
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian + 1e-9 * np.eye(len(weights)), gradient)
        weights -= step
        if np.abs(step).max() < 1e-8:
            break
    return weights


@dataclass(frozen=True)
class Fused:
    """A logistic model on signals standardised as on its training items."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, l2: float) -> Fused:
        mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
        return cls(mean, scale, fit_logistic((x - mean) / scale, y.astype(float), l2))

    def logit(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights[:-1] + self.weights[-1]


def shown_rates(scores: np.ndarray, stated: np.ndarray, cut: float) -> dict[str, Any]:
    shown = scores >= cut
    return {
        "stated_shown": round(float(shown[stated].mean()), 3) if stated.any() else None,
        "shown_not_stated": round(float((~stated[shown]).mean()), 3) if shown.any() else None,
        "shown": int(shown.sum()),
    }


def threshold_for(scores: np.ndarray, stated: np.ndarray, target: float) -> float:
    """The highest cut that still shows `target` of the stated sentences."""
    ordered = np.sort(scores[stated])[::-1]
    return float(ordered[max(0, math.ceil(target * len(ordered)) - 1)])


def leave_one_corpus_out(
    rows: list[dict[str, Any]], features: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """The fused score of each item from a model fit without its corpus, and the rates at a
    cut chosen on the other corpora."""
    x = np.array([[r[f] for f in features] for r in rows], dtype=np.float64)
    y = np.array([r["stated"] for r in rows], dtype=bool)
    corpora = np.array([r["corpus"] for r in rows])
    fused = np.zeros(len(rows))
    per_corpus: dict[str, Any] = {}
    for corpus in sorted(set(corpora)):
        train, test = corpora != corpus, corpora == corpus
        model = Fused.fit(x[train], y[train], args.l2)
        cut = threshold_for(model.logit(x[train]), y[train], args.target_shown)
        fused[test] = model.logit(x[test]) - cut
        per_corpus[corpus] = {
            "items": int(test.sum()),
            "stated": int(y[test].sum()),
            "auc": auc(fused[test], y[test]),
        } | shown_rates(fused[test], y[test], 0.0)
    return (
        {"features": features, "auc": auc(fused, y)}
        | shown_rates(fused, y, 0.0)
        | {"by_corpus": per_corpus}
    )


def auc(scores: Any, labels: Any) -> float | None:
    labels = [bool(v) for v in labels]
    if len(set(labels)) < 2:
        return None
    return round(roc_auc([float(s) for s in scores], [int(v) for v in labels]), 3)


def default_decision(row: dict[str, Any]) -> float:
    """The check's rule (`answer.support.stated`, default thresholds) on the one passage."""
    terms = TermSupport(
        shares={1: row["share"]},
        missing=("?",) if row["missing"] else (),
        terms=1,
        quoted=1 if row["quoted"] else None,
        located=(1,) if row["located"] else (),
    )
    defaults = AnswerSettings()
    return float(
        stated(
            terms,
            (1, row["judge"]),
            defaults.support_threshold,
            defaults.support_threshold_located,
        )
    )


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Each signal's AUC; then, on the items that have them, the fused score without the
    LLMs, with the generator's context reliance, with the judge, and the check's own rule."""
    base = [*CHEAP, "cosine", "question_cosine", "evaluator"]
    base += [s for s in ("support_model",) if all(s in r for r in rows)]
    slow = [s for s in ("reliance", "judge") if any(has(r, s) for r in rows)]
    out: dict[str, Any] = {"items": len(rows), "stated": sum(r["stated"] for r in rows)}
    out["signal_auc"] = {
        s: auc([r[s] for r in rows if has(r, s)], [r["stated"] for r in rows if has(r, s)])
        for s in base + slow
    }
    out["fused"] = leave_one_corpus_out(rows, base, args)
    for subset in ({"reliance"}, {"judge"}, {"reliance", "judge"}):
        part = [r for r in rows if all(has(r, s) for s in subset)]
        if not subset <= set(slow) or len({r["corpus"] for r in part}) < 2:
            continue
        y = [r["stated"] for r in part]
        name = "+".join(sorted(subset))
        out[f"items_with_{name}"] = {
            "items": len(part),
            "stated": sum(y),
            "fused_cheap": leave_one_corpus_out(part, base, args),
            "fused_with_" + name: leave_one_corpus_out(part, base + sorted(subset), args),
        } | ({"judge_auc": auc([r["judge"] for r in part], y)} if "judge" in subset else {})
        if subset == {"judge"}:
            decided = np.array([default_decision(r) for r in part])
            out[f"items_with_{name}"]["default_rule"] = shown_rates(
                decided, np.array(y, dtype=bool), 0.5
            )
    return out


def has(row: dict[str, Any], signal: str) -> bool:
    return signal in row and not math.isnan(row[signal])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=ROOT / "docs/data/support-labels.jsonl")
    parser.add_argument("--signals", type=Path, required=True, help="scores, read and extended")
    parser.add_argument("--support-model", type=Path, help="a support model's folder")
    parser.add_argument("--reliance-model", type=Path, help="a GGUF for context reliance")
    parser.add_argument("--judge-model", type=Path, help="a GGUF asked the check's question")
    parser.add_argument("--fit", action="store_true", help="fit and report, by corpus")
    parser.add_argument("--target-shown", type=float, default=0.95)
    parser.add_argument("--l2", type=float, default=1.0)
    args = parser.parse_args()
    lines = args.labels.read_text(encoding="utf-8").splitlines()
    items = [row for row in map(json.loads, lines) if "passage" in row]
    rows = score_items(args, items)
    if args.fit:
        print(json.dumps(report(rows, args), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
