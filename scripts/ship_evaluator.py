"""Ship a trained evaluator as crag-edge's default cross-encoder.

Copies the release files of `crag-edge evaluator train` (int8 graph, tokenizer, config, model
card) into the package (`crag_edge/evaluator/`) and rewrites the last block of the built-in
manifest, after `MARKER`, to pin them by size and sha256 with a `package` source: a fresh
install then has the cross-encoder tier without any download.

    python scripts/ship_evaluator.py /path/to/out/release --model-id crag-edge-evaluator-scifact
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from crag_edge.training.export import CARD, RELEASE_FILES, manifest_toml, model_card, pinned_file

PACKAGE = Path(__file__).resolve().parents[1] / "crag_edge"
SHIPPED = "evaluator"
MANIFEST = PACKAGE / "models" / "manifest.toml"
MARKER = "# --- the shipped retrieval evaluator: written by scripts/ship_evaluator.py ---"
INPUTS = """
## Inputs of the command above

```sh
python scripts/scifact_subset.py ../shared/data/scifact subset.jsonl --size 1365
crag-edge ingest --db scifact-subset.db --format beir subset.jsonl
python scripts/scifact_rationale_pairs.py --data ../shared/data/scifact --out rationale.jsonl
python scripts/scifact_chunk_pairs.py --db scifact-subset.db --data ../shared/data/scifact \\
  --out train_abstract.jsonl --heldout heldout_hits_abstract.jsonl \\
  --relevance abstract --heldout-hits-only
```

`rationale.jsonl`: every sentence of each evidence abstract of SciFact's train claims,
labelled 1 when SciFact's annotators marked it as a rationale. `train_abstract.jsonl`: each
train claim's top-10 retrieved chunks and every chunk of its evidence abstracts, labelled 1
when the chunk belongs to an evidence abstract. The held-out claims' pairs are never trained
on. WikiQA and Climate-FEVER were never trained on; their ROC-AUC is in crag-edge's
docs/training.md. Shipped with `python scripts/ship_evaluator.py <out>/release`.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path, help="the `release` folder of a training run")
    parser.add_argument("--model-id", required=True)
    parser.add_argument(
        "--license",
        default="Apache-2.0 (MiniLM weights); CC BY 4.0 / ODC-By 1.0 (SciFact training data)",
        help="short licence line for `models list` (the card carries the full attribution)",
    )
    args = parser.parse_args()
    report = json.loads((args.release.parent / "report.json").read_text(encoding="utf-8"))
    report["model_id"] = args.model_id
    target = PACKAGE / SHIPPED
    target.mkdir(exist_ok=True)
    files = []
    for name in RELEASE_FILES:
        if name == CARD:  # rewritten: the card of this crag-edge version, plus its inputs
            (target / name).write_text(model_card(report) + INPUTS, encoding="utf-8")
        else:
            shutil.copyfile(args.release / name, target / name)
        source = {"kind": "package", "package": "crag_edge", "member": f"{SHIPPED}/{name}"}
        files.append(pinned_file(target / name, source))
    training = report["training"]
    entry = {
        "role": "cross-encoder",
        "license": args.license,
        "description": (
            f"crag-edge's retrieval evaluator: MiniLM L{training['layers']} "
            f"{training['architecture']} fine-tuned on SciFact, int8 (see MODEL_CARD.md)"
        ),
        "default": True,
        "files": files,
    }
    text = MANIFEST.read_text(encoding="utf-8")
    head = text.split(MARKER)[0].rstrip("\n")
    MANIFEST.write_text(
        f"{head}\n\n{manifest_toml({args.model_id: entry}, [MARKER])}", encoding="utf-8"
    )
    print(f"shipped {args.model_id}: {sum(f['size'] for f in files) / 1e6:.1f} MB in {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
