"""Ship a trained evaluator as crag-edge's default cross-encoder (or, with `--support`, the
trained support model as the support check's model).

Copies the release files of a training run (int8 graph, tokenizer, config, model card) into
the package (`crag_edge/shipped_models/evaluator/` or
`crag_edge/shipped_models/support_model/`) and rewrites that model's block of the built-in
manifest, from its marker line to the next one, to pin them by size and sha256 with a
`package` source: a fresh install then has the model without any download.

    python scripts/ship_evaluator.py /path/to/out/release --model-id crag-edge-evaluator-scifact
    python scripts/ship_evaluator.py support-model/release --support
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import NamedTuple

from crag_edge.training.export import CARD, RELEASE_FILES, manifest_toml, model_card, pinned_file

PACKAGE = Path(__file__).resolve().parents[1] / "crag_edge"
MANIFEST = PACKAGE / "models" / "manifest.toml"
BLOCK_START = "# --- the shipped "
MARKER = "# --- the shipped retrieval evaluator: written by scripts/ship_evaluator.py ---"
SUPPORT_MARKER = (
    "# --- the shipped support model: written by scripts/ship_evaluator.py --support ---"
)
SUPPORT_INPUTS = """
## Inputs of the command above

```sh
apt-get install -y git-doc sqlite3-doc
# the pages docs/answer-quality.md lists ("Truthfulness"):
crag-edge ingest --db git-doc.db /usr/share/doc/git-doc/{git-stash,...}.html
crag-edge ingest --db sqlite-doc.db /usr/share/doc/sqlite3/{lang_createtable,...}.html
python scripts/formats_folder.py formats && crag-edge ingest --db formats.db formats/docs
python scripts/support_pairs.py --corpus git-doc=git-doc.db --corpus sqlite-doc=sqlite-doc.db \\
  --corpus formats=formats.db --tables sqlite-doc='/usr/share/doc/sqlite3/*.html' \\
  --scifact ../shared/data/scifact --out support-pairs.jsonl
```

The recipes (`crag_edge/training/support_data.py`), each without an LLM, most pairs asked
under a question made of the claim's own subject: a passage window's sentence, as written or
paraphrased by rule, is stated by its window; the window with that sentence replaced by
another of its length (MiniCheck's hard negative), the document's sentences next to it as
long as the window, the sentence with one fact changed (a number, option, name, negation or
condition; at most a quarter of the negatives), a sentence that points back read after a
sentence about something else, and the sentence asked under another sentence's question are
not; table rows read alone with their headers, against a sentence stating one of their cells
or another row's, and two rows read together, where only the asked row's cell answers.
SciFact: a SUPPORT claim against its rationale sentences is stated; the window with them
replaced, a CONTRADICT claim's rationales and other sentences as long are not. Every
negative's passage is as long as its positive's. The held-out corpus and SciFact's held-out
claims are never trained on; measurements in
crag-edge's docs/training.md ("Support model"). Shipped with
`python scripts/ship_evaluator.py <out>/release --support`.
"""
EVALUATOR_INPUTS = """
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


class Shipped(NamedTuple):
    """Where a shipped model goes and how the manifest describes it."""

    folder: str
    marker: str
    role: str
    license: str
    description: str
    inputs: str


EVALUATOR = Shipped(
    "shipped_models/evaluator",
    MARKER,
    "cross-encoder",
    "Apache-2.0 (MiniLM weights); CC BY 4.0 / ODC-By 1.0 (SciFact training data)",
    "crag-edge's retrieval evaluator: MiniLM L{layers} {architecture} fine-tuned on SciFact, "
    "int8 (see MODEL_CARD.md)",
    EVALUATOR_INPUTS,
)
SUPPORT = Shipped(
    "shipped_models/support_model",
    SUPPORT_MARKER,
    "support",
    "Apache-2.0 (MiniLM weights); training data: see MODEL_CARD.md "
    "(SciFact CC BY 4.0 / ODC-By 1.0)",
    "crag-edge's support model: does a passage state a sentence? MiniLM L{layers} "
    "{architecture} trained on pairs made from documentation and SciFact, int8 "
    "(see MODEL_CARD.md)",
    SUPPORT_INPUTS,
)


def replace_block(text: str, marker: str, block: str) -> str:
    """The manifest with the block opened by `marker` (up to the next shipped block, or the
    end) replaced by `block`, or `block` appended when there is none yet."""
    before, found, after = text.partition(marker)
    rest = ""
    if found:
        following = after.find("\n" + BLOCK_START)
        rest = after[following:] if following >= 0 else ""
    return f"{before.rstrip()}\n\n{block.rstrip()}\n{rest}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path, help="the `release` folder of a training run")
    parser.add_argument("--model-id", help="default: the run's own (the support model's id)")
    parser.add_argument("--support", action="store_true", help="ship the support model")
    parser.add_argument("--notes", type=Path, help="Markdown appended to the model card")
    parser.add_argument(
        "--license",
        help="short licence line for `models list` (the card carries the full attribution)",
    )
    args = parser.parse_args()
    report = json.loads((args.release.parent / "report.json").read_text(encoding="utf-8"))
    report["model_id"] = args.model_id or report["model_id"]
    shipped = SUPPORT if args.support else EVALUATOR
    target = PACKAGE / shipped.folder
    target.mkdir(exist_ok=True)
    files = []
    for name in RELEASE_FILES:
        if name == CARD:  # rewritten: the card of this crag-edge version, plus its inputs
            notes = args.notes.read_text(encoding="utf-8") if args.notes else ""
            card = model_card(report) + shipped.inputs + notes
            (target / name).write_text(card, encoding="utf-8")
        else:
            shutil.copyfile(args.release / name, target / name)
        source = {"kind": "package", "package": "crag_edge", "member": f"{shipped.folder}/{name}"}
        files.append(pinned_file(target / name, source))
    training = report["training"]
    entry = {
        "role": shipped.role,
        "license": args.license or shipped.license,
        "description": shipped.description.format(**training),
        "default": True,
        "files": files,
    }
    block = manifest_toml({report["model_id"]: entry}, [shipped.marker])
    MANIFEST.write_text(
        replace_block(MANIFEST.read_text(encoding="utf-8"), shipped.marker, block),
        encoding="utf-8",
    )
    print(f"shipped {report['model_id']}: {sum(f['size'] for f in files) / 1e6:.1f} MB in {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
