"""The located rule (`answer.support.located`) on items read by hand: how many stated
sentences it locates in their passage, and how many unstated, out-of-context and
not-answering ones.

A located sentence needs less of the judge (`support_threshold_located`), so a change to
the rule is worth taking when it locates more stated sentences and no more of the rest.
Each labelled item that carries its passage (`docs/data/support-labels.jsonl`: a sentence,
its question, the one passage it is checked against, and its label) is read by
`term_support` against that passage alone.

    python scripts/measure_located.py --labels docs/data/support-labels.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from crag_edge.answer.support import term_support
from crag_edge.result import ContextItem


def located_by_label(labels: Path) -> dict[str, dict[str, int]]:
    """Per label, how many items the rule locates in their passage and how many it does not."""
    counts: Counter[tuple[str, bool]] = Counter()
    for line in labels.open(encoding="utf-8"):
        row = json.loads(line)
        if "passage" not in row:  # a sentence read against a whole answer's context
            continue
        passage = row["passage"]
        item = ContextItem(1, 1, 0, "", "", 0, len(passage), passage, "corpus", 1.0)
        terms = term_support(row["sentence"], [item], None, row.get("question", ""))
        counts[(row["label"], bool(terms.located))] += 1
    names = sorted({label for label, _ in counts})
    return {name: {"located": counts[(name, True)], "not": counts[(name, False)]} for name in names}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(located_by_label(args.labels), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
