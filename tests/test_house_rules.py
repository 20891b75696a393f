"""House rule: code and docs name a rule by what it does, never the design note or work
session it came from. The scan keeps such references from creeping back in."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ["crag_edge", "tests", "scripts", "benchmarks", "docs", "README.md"]
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".sh", ".cfg", ".ini", ".yml", ".yaml"}
# Whitespace may be a line break: a reflowed paragraph must not hide "Session\n  4".
HISTORY_REFERENCE = re.compile(
    r"seeds?\s?0{1,2}\d|seed\s\d{3}|seed'[s]|seed\sdesign|until\ssession|sessions?\s+\d"
    r"|design(?:\.md)?\s*§\s*\d",
    re.IGNORECASE,
)


# A document named in the code or the docs must be one a reader of the repository can open:
# a file name in capitals (a project document) or a path under docs/.
DOCUMENT_NAME = re.compile(r"(?<![\w/.-])((?:docs/)?[A-Z][A-Z0-9_-]*\.md|docs/[\w-]+\.md)\b")
PROSE = ["crag_edge", "scripts", "benchmarks", "docs", "README.md"]  # tests name fixture files


def scanned_files(names: list[str] = SCANNED) -> list[Path]:
    files = []
    for name in names:
        path = ROOT / name
        candidates = path.rglob("*") if path.is_dir() else [path]
        files += [p for p in candidates if p.is_file() and p.suffix in TEXT_SUFFIXES]
    return sorted(files)  # this file included: its examples are assembled from parts


def history_references(text: str) -> list[str]:
    """Each match as 'line N: text', so a failure points at the place to rewrite."""
    return [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group()!r}"
        for m in HISTORY_REFERENCE.finditer(text)
    ]


def missing_documents(text: str) -> list[str]:
    """Each document `text` names that the repository does not hold, as 'line N: name' (a
    path from the root, or a name that some file in it bears: `MODEL_CARD.md`)."""
    held = {path.name for path in scanned_files(PROSE)}
    return [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(1)!r}"
        for m in DOCUMENT_NAME.finditer(text)
        if not (ROOT / m.group(1)).is_file() and m.group(1) not in held
    ]


# The phrasings the pattern must catch, assembled from parts so that this file itself names
# no design document or past piece of work (the scan would rightly flag it otherwise).
_DOC, _WORK, _NOTE = "se" + "ed", "ses" + "sion", "DES" + "IGN"


@pytest.mark.parametrize(
    "text",
    [
        f"rank_weighted ({_DOC} 003 variance check)",
        f"Two modes ({_DOC}s 001, 003, 004)",
        f"{_DOC.title()} 002's table",
        f"except the {_DOC} design's names",
        f"the 80-question sample of {_WORK} 3",
        f"A list of one to three items goes unjudged. {_WORK.title()}\n  4 spent one call",
        f"until {_WORK} 4 every query paid that",
        f"skewed towards 1 ({_NOTE} §4), so",
        f"as {_NOTE}.md §10 says",
    ],
)
def test_the_pattern_catches_development_history(text: str) -> None:
    assert history_references(text)


@pytest.mark.parametrize(
    "text",
    [
        "a seeded random draw of 12 train claims",
        "final loss 0.342; seed 13.",
        "torch.manual_seed(seed)",
        'parser.add_argument("--seed", type=int, default=7)',
        "sample_text(seed=7, paragraphs=400)",
        "the LLM and ONNX sessions are shared by every request",
    ],
)
def test_the_pattern_leaves_random_seeds_and_runtime_sessions_alone(text: str) -> None:
    assert not history_references(text)


def test_no_text_speaks_of_design_notes_or_work_sessions() -> None:
    files = scanned_files()
    assert files, f"nothing to scan under {ROOT}: SCANNED names no text files"
    found = [
        f"{path.relative_to(ROOT)} {where}"
        for path in files
        for where in history_references(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, "name the rule or the reason instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        (f"as {_NOTE}.md says", True),
        ("the table in docs/nowhere-at-all.md", True),
        ("NOTES.md lists them", True),
        ("see README.md and docs/settings.md", False),
        ("a fixture file such as guide.md", False),
    ],
)
def test_the_document_check_catches_names_the_repository_does_not_hold(
    text: str, missing: bool
) -> None:
    assert bool(missing_documents(text)) == missing


def test_no_text_names_a_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)} {where}"
        for path in scanned_files(PROSE)
        for where in missing_documents(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, "name a document in the repository, or say what it says:\n" + "\n".join(found)


# A figure that was measured: a metric's value, two values compared, the machine's cores, a
# duration in ms or µs or an approximate one, a speed-up, a "measured:" aside, a wording tried.
# Such figures and their commands belong in docs/*.md; code says why and points there.
MEASUREMENT = re.compile(
    r"\b(?:ROC-AUC|AUC|nDCG(?:@\d+)?|MRR|F1|recall@\d+)\s*(?:of|=|:)?\s*\(?~?\d*\.\d+"
    r"|\d*\.\d+\s*(?:ms|µs|s)?\s*vs\.?\s*~?\d*\.\d+"
    r"|\bon (?:one|two|four|eight|\d+) (?:CPU )?cores\b"
    r"|~?\d+(?:\.\d+)?\s?(?:ms|µs)\b"
    r"|~\d+(?:\.\d+)?\s?s\b"
    r"|\b\d+(?:\.\d+)?\s?[x\u00d7]\s+(?:faster|slower|quicker|the speed)\b"
    r"|\bmeasured:\s"
    r"|\b(?:we tried|tried as well)\b",
    re.IGNORECASE,
)
BACKTICKED = re.compile(r"`[^`\n]*`")  # an example of output or a format: `12.5%`, `84633ms`


def code_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of the docstrings and whole-line comments of a Python source. String
    literals that run (help text, messages) are not prose; nor is a comment beside code on
    its line, which gives a value its unit (`TIMEOUT = 0.05  # 50 ms`)."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and not token.line[: token.start[1]].strip()
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                found.append((node.body[0].lineno, docstring))
    return sorted(found)


def measured_figures(source: str) -> list[str]:
    """Each measured figure in the code's prose, as 'line N: figure'."""
    return [
        f"line {line + text.count(chr(10), 0, m.start())}: {m.group()!r}"
        for line, text in code_prose(source)
        for m in MEASUREMENT.finditer(BACKTICKED.sub("", text))
    ]


# Each source with whether the check must flag it: figures measured, then values, units
# beside code, help text that runs, examples in backticks and pointers to docs/.
MEASUREMENT_CASES = [
    ('"""Ranks as well (AUC 0.7 on WikiQA)."""', True),
    ("# hybrid nDCG@10 0.6 against fp32\nX = 1", True),
    ('"""About a second on two cores."""', True),
    ('def f():\n    """A pass per pair costs 120 ms."""', True),
    ("# int8 is 3.2x faster on CPU\nX = 1", True),
    ('"""Strips ranked by coverage (0.722 vs 0.735)."""', True),
    ("# each check costs ~0.5 s of prompt\nX = 1", True),
    ('"""Stored readings (measured: 20 hits at once)."""', True),
    ('"""A title above the passages, tried as well, made it worse."""', True),
    ('"""A row reads `Discount: 12.5%`, never `84633ms`."""', False),
    ("TIMEOUT = 0.05  # 50 ms between polls", False),
    ('X = Field(60, description="Seconds a request may take; 120 ms is too few.")', False),
    ('"""Faster on CPU; measured in docs/grading.md ("Speed")."""', False),
    ('"""Thresholds 0.5 / 0.3: an item below 0.3 is dropped."""', False),
    ("# A page whose link text is at least this share is navigation\nSHARE = 0.6", False),
]


@pytest.mark.parametrize(("source", "flagged"), MEASUREMENT_CASES)
def test_the_measurement_check_flags_figures_and_leaves_values_alone(
    source: str, flagged: bool
) -> None:
    assert bool(measured_figures(source)) == flagged


def test_code_prose_states_no_measured_figures() -> None:
    """Shipped code only: scripts/ and benchmarks/ are the measuring tools, whose prose states
    their targets and rules in figures."""
    found = [
        f"{path.relative_to(ROOT)} {where}"
        for path in sorted((ROOT / "crag_edge").rglob("*.py"))
        for where in measured_figures(path.read_text(encoding="utf-8"))
    ]
    assert not found, "move the figure to docs/*.md and point there:\n" + "\n".join(found)
