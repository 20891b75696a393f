"""Prompt and generation speed of whichever llama-cpp-python this interpreter imports, from
llama.cpp's own performance counters: to compare the portable build the offline bundle ships
(every CPU variant, the best chosen at run time) with a build for this CPU (`-march=native`).

    .venv/bin/python scripts/measure_llama_speed.py models/qwen2.5-coder-1.5b-instruct/*.gguf
    /opt/crag-edge/bin/python scripts/measure_llama_speed.py <same file>

Prints one JSON line: the build (the CPU variant loaded, or "native"), prompt and generation
tokens per CPU-second on one thread, each the median of `--runs` runs with a fresh context.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import llama_cpp

from crag_edge.models.llama_backends import load_cpu_backends

# About 400 tokens of ordinary prose: a prompt the size of a few retrieved passages.
PROMPT = " ".join(
    [
        "SQLite's write-ahead log appends changes to a separate file instead of overwriting",
        "pages of the database, so readers keep reading the last committed state while one",
        "writer appends. A checkpoint later copies the logged pages back into the database.",
    ]
    * 8
)


def loaded_variant() -> str:
    """The CPU library llama.cpp kept, from this process's memory map."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        names = {line.rsplit("/", 1)[-1].strip() for line in maps if "libggml-cpu-" in line}
    return ", ".join(sorted(names)) or "native (CPU backend built in)"


def one_run(model: Path, generate: int) -> tuple[float, float]:
    """Prompt and generation tokens per CPU-second on one thread: CPU time, not wall time,
    so that other programs on a busy machine do not count against the build measured."""
    llm = llama_cpp.Llama(
        model_path=str(model), n_ctx=2048, n_threads=1, n_threads_batch=1, verbose=False
    )
    tokens = llm.tokenize(PROMPT.encode())
    start = time.process_time()
    stream = llm.generate(tokens, top_k=1, temp=0.0, reset=True)
    next(stream)  # the prompt evaluated, and its first token sampled
    prompted = time.process_time()
    for _ in range(generate):
        next(stream)
    done = time.process_time()
    llm.close()
    return len(tokens) / (prompted - start), generate / (done - prompted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--generate", type=int, default=96)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load_cpu_backends(llama_cpp)
    runs = [one_run(args.model, args.generate) for _ in range(args.runs)]
    print(
        json.dumps(
            {
                "build": loaded_variant(),
                "llama_cpp_python": llama_cpp.__version__,
                "model": args.model.name,
                "threads": 1,
                "prompt_tok_s": round(statistics.median(p for p, _ in runs), 1),
                "gen_tok_s": round(statistics.median(g for _, g in runs), 1),
                "runs": [[round(p, 1), round(g, 1)] for p, g in runs],
            }
        )
    )


if __name__ == "__main__":
    main()
