"""Whether the judge can tell a passage that answers the question from one that does not.

For each answer of an `eval qa --records` file that the reader was shown (CRAG's: its first
shown sentence's passage; plain RAG's off-corpus answers: the passage it cites first, else
[1]), the local LLM is asked, with the answer prompt's system turn and the answer's own
context passages, "Does passage [n] answer this question?", and P(yes) / (P(yes) + P(no))
over its first token is printed as one JSON line with the question's id, the system and the
answer's outcome (docs/formats.md, "Answered by the default models").

    python scripts/measure_answerability.py --records formats-answers.jsonl \\
        --model models/qwen2.5-coder-1.5b-instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crag_edge.answer.generation import CONTEXT_OPENING, SYSTEM, passages_text
from crag_edge.models.chat_model import Message
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem

ASK = (
    "{opening}{passages}\n\nQuestion: {question}\n\n"
    "Does passage [{n}] answer this question? Answer Yes or No."
)
CITED = re.compile(r"\[(\d+)\]")


def asked_passage(record: dict[str, Any]) -> int | None:
    """The passage whose answerability is measured, None for an answer not measured."""
    if record["system"] == "crag":
        shown = [s for s in (record.get("support") or {}).get("sentences", []) if s["shown"]]
        return shown[0]["passage"] if shown else None
    if record["in_corpus"]:
        return None
    cited = CITED.search(record["answer"])
    return int(cited.group(1)) if cited else 1


def messages(record: dict[str, Any], n: int) -> list[Message]:
    context = [
        ContextItem(k, 1, 1, where, where, 0, len(text), text, "corpus", 0.9)
        for k, where, text in record["passages"]
    ]
    if n not in {item.n for item in context}:
        n = context[0].n
    user = ASK.format(
        opening=CONTEXT_OPENING, passages=passages_text(context), question=record["question"], n=n
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, nargs="+", required=True)
    parser.add_argument("--model", type=Path, required=True)
    args = parser.parse_args()
    runtime = LlamaRuntime(args.model, model_id="judge", n_ctx=8192, timeout_s=600)
    for path in args.records:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            n = asked_passage(record)
            if n is None:
                continue
            [row] = runtime.answer_logprobs(
                [messages(record, n)], ("yes", "no"), timeout_s=600
            ).rows
            assert row is not None
            p = 1.0 / (1.0 + math.exp(row[1] - row[0]))
            print(
                json.dumps(
                    {
                        "id": record["question_id"],
                        "system": record["system"],
                        "outcome": record["outcome"],
                        "p": round(p, 3),
                    }
                )
            )


if __name__ == "__main__":
    main()
