"""A folder of every document format the loaders read, as the format tests build it (real
files made by pandoc, LibreOffice, poppler and img2pdf, a mailbox and a saved message), for
asking the default LLM the questions of `docs/data/formats-qa.jsonl` (docs/formats.md):

    python scripts/formats_folder.py OUT      # writes OUT/docs
    crag-edge ingest --db formats.db OUT/docs
    crag-edge eval qa --db formats.db --questions docs/data/formats-qa.jsonl --json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_format_ingest import user_folder


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/formats_folder.py OUT")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    print(user_folder(out))


if __name__ == "__main__":
    main()
