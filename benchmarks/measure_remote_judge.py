"""Measure how far the LLM judge's logprob scores through an OpenAI-compatible server are
from the in-process runtime's, on the same GGUF model and the same WikiQA dev pairs.

Starts `python -m llama_cpp.server` on 127.0.0.1 for the model (one thread, `--logits_all
true`), scores the same query groups through both runtimes and prints one JSON object: the
largest and the mean absolute score difference and the seconds each took.

    .venv/bin/python -m benchmarks.measure_remote_judge --model smollm2-135m-instruct \\
        --wikiqa-pairs 40
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.measure_llm_judge import DATA, sample_groups
from crag_edge.config import Settings
from crag_edge.evaluation.pairs import Pair, pairs_from
from crag_edge.grading.llm_judge import LlmJudge
from crag_edge.models.chat_model import ChatModel
from crag_edge.models.llm import LlamaRuntime
from crag_edge.models.manifest import load_manifest
from crag_edge.models.registry import installed_file
from crag_edge.models.remote_llm import OpenAiLlm
from tests.servers import llama_cpp_server


def scores(runtime: ChatModel, groups: list[list[Pair]]) -> tuple[list[float], float]:
    judge = LlmJudge(runtime, max_passage_tokens=256)
    started = time.perf_counter()
    found = [s for g in groups for s in judge.score(g[0].query, [p.passage for p in g]).scores]
    return found, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="manifest id")
    parser.add_argument("--wikiqa-pairs", type=int, default=40)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    models = Settings.load().models
    spec = load_manifest(models.model_dir).get(args.model)
    path = installed_file(models, args.model, spec.files[0].name)
    pairs = pairs_from("wikiqa", DATA / "wikiqa" / "WikiQA-dev.tsv")
    groups = sample_groups(pairs, args.wikiqa_pairs, 3, 0, args.seed)
    local = LlamaRuntime(path, model_id=args.model, n_ctx=args.context, n_threads=1, timeout_s=3600)
    in_process, local_s = scores(local, groups)
    with (
        tempfile.TemporaryDirectory() as folder,
        llama_cpp_server(path, Path(folder) / "log", n_ctx=args.context) as server,
    ):
        remote_settings = Settings.load(
            llm_url=server.url, llm_context=args.context, llm_timeout_s=3600
        )
        through_server, remote_s = scores(OpenAiLlm.connect(remote_settings.models), groups)
    gaps = [abs(a - b) for a, b in zip(through_server, in_process, strict=True)]
    report: dict[str, Any] = {
        "model": args.model,
        "pairs": len(gaps),
        "groups": len(groups),
        "max_abs_difference": round(max(gaps), 4),
        "mean_abs_difference": round(sum(gaps) / len(gaps), 4),
        "in_process_seconds": round(local_s, 1),
        "server_seconds": round(remote_s, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
