"""Questions a table row answers, end to end on documents made by the real tools: the
PostgreSQL money row in an OpenDocument file is kept as trustworthy evidence, and an answer
that restates the boolean row of a pandoc EPUB is shown as the row's own words.

The grading and support checks run on the tests' small real LLM (SmolLM2-135M) and the
shipped evaluator; what is asserted is decided by the rules (the row kept with the judge's
vote, the row's cells quoted), not by a close call of the small judge."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from crag_edge.answer.checked import CheckedAnswer
from crag_edge.answer.generation import UNSUPPORTED, AnswerFinish
from crag_edge.answer.support import answer_facts, facts, held_words, stated, term_support
from crag_edge.answer.table_rows import misplaced, row_cells_asked
from crag_edge.config import AnswerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.ingest import load_file
from crag_edge.ingest.formats.builder import record_values
from crag_edge.models.chat_model import TextStream
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem, CragResult
from crag_edge.types import Action, Decision
from tests.fixtures import SMOLLM

FORMATS = Path(__file__).parent / "data" / "formats"
SAMPLE = Path(__file__).parent.parent / "sample_corpus"
BOOLEAN_ROW = "Name: boolean; Storage Size: 1 byte; Description: state of true or false"
STATED_ROW = "boolean 1 byte state of true or false [1]."


@pytest.fixture(scope="module")
def boolean_epub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Boolean Type page as pandoc writes it into an EPUB (the table's caption a
    `Table:` line of its Markdown)."""
    epub = tmp_path_factory.mktemp("epub") / "boolean-type.epub"
    source = FORMATS / "sources" / "boolean-type.md"
    subprocess.run(["pandoc", str(source), "-o", str(epub)], check=True, timeout=120)
    return epub


@pytest.fixture(scope="module")
def smollm(smollm_path: Path) -> Iterator[LlamaRuntime]:
    yield LlamaRuntime(smollm_path, model_id=SMOLLM, n_ctx=2048, n_threads=1, timeout_s=120)


def test_a_records_values_are_the_row_as_the_table_shows_it() -> None:
    text = (
        f"Table 8.19. Boolean Data Type: {BOOLEAN_ROW}\n"
        "Table 8.3. Monetary Types — Name: money; Storage Size: 8 bytes\n"
        "Prose with a list; of: things is kept as written.\n"
        "A note: one field is no record."
    )
    assert record_values(text).split("\n") == [
        "boolean 1 byte state of true or false",
        "money 8 bytes",
        "Prose with a list; of: things is kept as written.",
        "A note: one field is no record.",
    ]


def test_a_sentence_restating_a_rows_cells_quotes_the_row(boolean_epub: Path) -> None:
    doc = load_file(boolean_epub, boolean_epub.read_bytes(), 10_000_000)
    assert BOOLEAN_ROW in doc.text
    passage = [context_item(doc.text)]
    question = "How much storage does a boolean use?"
    assert term_support(STATED_ROW, passage, question=question).quoted == 1
    # The cells in another order, or a value changed, are not the row's words.
    for changed in ("1 byte boolean state of true or false [1].",
                    "boolean 2 byte state of true or false [1]."):  # fmt: skip
        assert term_support(changed, passage, question=question).quoted is None


@pytest.mark.models
def test_the_stated_boolean_row_is_shown(
    boolean_epub: Path, smollm: LlamaRuntime, embedder: OnnxEmbedder
) -> None:
    """The small judge scores this sentence under the located threshold against the row's
    passage; as the row's own cells it is shown without asking."""
    doc = load_file(boolean_epub, boolean_epub.read_bytes(), 10_000_000)
    question = "How much storage does a boolean use?"
    answer = checked(STATED_ROW, question, context_item(doc.text), smollm, embedder)
    shown = "".join(answer)
    [sentence] = answer.support.sentences
    assert shown == STATED_ROW, sentence
    assert sentence.shown and sentence.checked_by == "quote"


@pytest.mark.models
def test_the_money_row_of_an_odt_is_kept_as_trustworthy_evidence(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """Asked of the OpenDocument file among the sample corpus's documents, the loop keeps
    the row's passage (the judge finds it relevant) and does not end with nothing
    trustworthy found."""
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    shutil.copy(FORMATS / "money-type.odt", docs)
    settings = Settings.load(llm=SMOLLM)
    with Engine.open(tmp_path / "kb.db", settings, create=True, embedder=embedder) as engine:
        engine.ingest([docs])
        result = engine.query("How many bytes does the money type take?")
    assert not result.insufficient_evidence, result.reason
    assert any("Name: money; Storage Size: 8 bytes" in item.text for item in result.context)


def checked(
    written: str,
    question: str,
    passage: ContextItem,
    llm: LlamaRuntime,
    embedder: OnnxEmbedder,
    settings: AnswerSettings | None = None,
) -> CheckedAnswer:
    """`written`, streamed word by word as the model writes it, checked against `passage`
    as an answer to `question` from evidence the loop kept."""
    result = CragResult(question, Decision.AMBIGUOUS, Action.REFINE, 0.44, "kept", [passage], [])

    def pieces() -> Generator[str, None, AnswerFinish]:
        yield from (f" {w}" if i else w for i, w in enumerate(written.split()))
        return "stop"

    settings = settings or AnswerSettings(support_budget_s=120.0)
    return CheckedAnswer(TextStream(pieces()), result, llm, settings, embedder=embedder)


def context_item(text: str) -> ContextItem:
    return ContextItem(1, 1, 1, "boolean-type.epub", "8.6. Boolean Type", 0, len(text), text,
                       "corpus", 0.9)  # fmt: skip


MANUAL_TABLES = """# Reference tables

## Format Characters

| Format | C Type | Python type | Standard size |
|---|---|---|---|
| l | long | integer | 4 |
| q | long long | integer | 8 |

## Byte Order

The 'P' format character is only available for the native byte ordering (selected as the
default or with the '@' byte order character).

| Character | Byte order |
|---|---|
| @ | native |
| ! | network (= big-endian) |

## LogRecord attributes

| Attribute name | Format | Description |
|---|---|---|
| msg | (none) | The format string passed in the original logging call, merged into the message. |
| process | %(process)d | Process ID (if available). |
| thread | %(thread)d | Thread ID (if available). |

## cidr

| cidr Input | cidr Output | abbrev(cidr) |
|---|---|---|
| 192.168/24 | 192.168.0.0/24 | 192.168.0/24 |
| 128.1 | 128.1.0.0/16 | 128.1/16 |

## Distributions

| Distribution | R name | additional arguments |
|---|---|---|
| binomial | binom | size, prob |
| negative binomial | nbinom | size, prob, mu |
| Weibull | weibull | shape, scale |

## Numeric Types

| Name | Storage Size | Description |
|---|---|---|
| integer | 4 bytes | typical choice for integer |
| bigint | 8 bytes | large-range integer |

## Berths

| Berth | Length | Depth |
|---|---|---|
| A1 | 12 m | 3.1 m |
| B7 | 18 m | 4.4 m |
"""


@pytest.fixture(scope="module")
def manual_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Rows of seven reference tables (Python's struct and logging pages, PostgreSQL's cidr
    examples and numeric types, R's distributions, a harbour's berths) in an OpenDocument
    file pandoc writes, as ingest reads them: each table's lines by the heading they
    follow."""
    folder = tmp_path_factory.mktemp("odt")
    source, odt = folder / "tables.md", folder / "tables.odt"
    source.write_text(MANUAL_TABLES, encoding="utf-8")
    subprocess.run(["pandoc", str(source), "-o", str(odt)], check=True, timeout=120)
    text = load_file(odt, odt.read_bytes(), 10_000_000).text
    sections = {}
    headings = re.findall(r"^## (.+)$", MANUAL_TABLES, re.MULTILINE)
    for heading, rest in zip(headings, [*headings[1:], None], strict=True):
        start = text.index(f"\n{heading}\n")
        sections[heading] = text[start : text.index(f"\n{rest}\n") if rest else len(text)].strip()
    return sections


def located_in(sentence: str, passage: str, question: str) -> tuple[int, ...]:
    return term_support(sentence, [context_item(passage)], question=question).located


def test_a_rows_value_in_the_questions_words_is_located_in_its_row(
    manual_tables: dict[str, str],
) -> None:
    """The judge scored this sentence 0.73 against the row's passage, under the threshold;
    the row holds its value under the column it names, so it is located there, "as stated
    in" (words about the passages, which no row holds) aside."""
    rows = manual_tables["Format Characters"]
    question = "What is the standard size of the struct format character q?"
    sentence = "The standard size of the struct format character q is 8 bytes, as stated in [2]."
    terms = term_support(sentence, [context_item(rows)], question=question)
    assert terms.located == (1,)
    assert stated(terms, (1, 0.73), 0.77, 0.65)
    # Another row's value, stated of q, is not located: the row it names holds 8.
    assert (
        located_in("The standard size of the format character q is 4 bytes.", rows, question) == ()
    )


CIDR_QUESTION = "What does abbrev() return for the cidr input 192.168/24?"
PROCESS_QUESTION = "Which format string puts the process ID into a log record's message?"
BYTE_ORDER_QUESTION = "Which byte order does the struct format prefix ! select?"


@pytest.mark.parametrize(
    ("section", "question", "sentence", "where"),
    [
        ("cidr", CIDR_QUESTION,
         "The abbrev() function returns 192.168.0/24 for the cidr input 192.168/24 [1].", (1,)),
        # The row's cidr Output, stated as what abbrev returns: not under the column named.
        ("cidr", CIDR_QUESTION,
         "The abbrev() function returns 192.168.0.0/24 for the cidr input 192.168/24 [1].", ()),
        # The question's own value given back beside the table's number: a reference says
        # where an answer is, not what it is.
        ("cidr", CIDR_QUESTION,
         "The abbrev() function returns 192.168/24 for the cidr input 192.168/24 from Table 1.",
         ()),
        # A column named with its own value ("C type long long") leaves the others open: the
        # size is stated of the row, under the column the sentence does not name.
        ("Format Characters", "What is the C type of the format character q?",
         "The format character q has the C type long long and takes 8 bytes [1].", (1,)),
        # A row restated with its column's name: the answer is words, not a fact, and every
        # word beyond the question's is the row's.
        ("Byte Order", BYTE_ORDER_QUESTION,
         "The byte order selected by the struct format prefix ! is network (= big-endian).",
         (1,)),
        ("Byte Order", BYTE_ORDER_QUESTION,
         "The byte order selected by the struct format prefix ! is native.", ()),
        # A literal is a fact of its own: the row holds it, or it is located nowhere, though
        # its word ("process") is there.
        ("LogRecord attributes", PROCESS_QUESTION,
         "The format string that puts the process ID into a log record's message is "
         "%(process)d.", (1,)),
        ("LogRecord attributes", PROCESS_QUESTION,
         "The format string that puts the process ID into a message is %(process)s.", ()),
    ],
)  # fmt: skip
def test_a_value_is_located_where_its_row_and_column_hold_it(
    manual_tables: dict[str, str], section: str, question: str, sentence: str, where: tuple[int]
) -> None:
    passage = manual_tables[section] + "\nTable 1 shows some examples."
    assert located_in(sentence, passage, question) == where


def test_a_symbol_named_in_quotes_is_a_name_no_passage_may_lack(
    manual_tables: dict[str, str],
) -> None:
    """Asked about the `!` prefix, the model wrote of the 'P' format's native ordering; the
    judge passed it (0.77) on a passage that never writes `!`."""
    question = "Which byte order does the struct format prefix ! select?"
    prose, rows = manual_tables["Byte Order"].split("\n\n", 2)[1:]
    sentence = (
        "The byte order is selected by the '!' format prefix, which is available for the "
        "native byte ordering (selected as the default or with the '@' byte order character)."
    )
    assert term_support(sentence, [context_item(prose)], question=question).missing == ("!",)
    assert term_support(sentence, [context_item(rows)], question=question).missing == ()


WEIBULL_QUESTION = "Which additional arguments does R's Weibull distribution take?"


@pytest.mark.parametrize(
    ("section", "question", "sentence", "cells"),
    [
        # A count of the model's own and an item too many: the row's cell as it reads.
        ("Distributions", WEIBULL_QUESTION,
         "The Weibull distribution takes three additional arguments: shape, scale, and df.",
         "Weibull \u2014 additional arguments: shape, scale"),
        # Two rows named by "binomial": the one the question names by more of its terms.
        ("Distributions", "Which additional arguments does the negative binomial take?",
         "The negative binomial distribution takes the additional arguments size and prob.",
         "negative binomial \u2014 additional arguments: size, prob, mu"),
        # The question names no column of the row, nor any of its values.
        ("Distributions", "How is the Weibull distribution used in reliability studies?",
         "The Weibull distribution takes additional arguments for reliability.", None),
        # A column only the question names: the sentence speaks of something else.
        ("Distributions", WEIBULL_QUESTION,
         "The Weibull distribution is a continuous distribution.", None),
        # A name the passage never holds: another program's Weibull.
        ("Distributions", "Which additional arguments does SciPy's Weibull distribution take?",
         "SciPy's Weibull distribution takes the additional arguments c and scale.", None),
        # The R name writes the row's subject: what the row is called, not a fact about it.
        ("Distributions", "What is the R name of the gamma distribution?",
         "The R name of the Weibull distribution is weibull.", None),
        # A value of the column's kind ("bytes") speaks of the column it does not name.
        # An adjective names the measure a column holds.
        ("Berths", "How deep is the water at berth B7?",
         "The water at berth B7 is 4.4 meters deep.", "B7 \u2014 Depth: 4.4 m"),
        ("Numeric Types", "How many bytes does a bigint take?",
         "A bigint takes 4 bytes.", "bigint \u2014 Storage Size: 8 bytes"),
        # Another column's value, the row named by the question's input: that column's
        # cell, though it holds the input's numbers.
        ("cidr", CIDR_QUESTION,
         "The abbrev() function returns 192.168.0.0/24 for the cidr input 192.168/24.",
         "192.168/24 \u2014 abbrev(cidr): 192.168.0/24"),
    ],
)  # fmt: skip
def test_a_rows_cells_asked_are_offered_for_a_sentence_that_misstates_them(
    manual_tables: dict[str, str], section: str, question: str, sentence: str, cells: str | None
) -> None:
    found = row_cells_asked(sentence, question, manual_tables[section], facts, held_words)
    assert (found and found.text) == cells


@pytest.mark.models
def test_a_removed_sentence_gives_way_to_the_row_it_misstates(
    manual_tables: dict[str, str], smollm: LlamaRuntime, embedder: OnnxEmbedder
) -> None:
    """The model's sentence names the Weibull row and its column but a count no passage
    holds: it is removed, listed, and the row's cells are shown in its place, cited to
    the row."""
    passage = context_item(manual_tables["Distributions"])
    written = "The Weibull distribution takes 3 additional arguments: shape, scale and df [1]."
    answer = checked(written, WEIBULL_QUESTION, passage, smollm, embedder)
    shown = "".join(answer)
    removed, row = answer.support.sentences
    assert shown == "Weibull \u2014 additional arguments: shape, scale [1].", answer.support
    assert (removed.shown, removed.checked_by, removed.reason) == (
        False, "terms", "no passage holds 3"
    )  # fmt: skip
    assert (row.shown, row.checked_by, row.supported) == (True, "row-cells", True)
    assert answer.finish_reason == "stop"


@pytest.mark.models
def test_a_value_from_a_column_the_sentence_does_not_name_is_removed_whoever_passed_it(
    manual_tables: dict[str, str], smollm: LlamaRuntime, embedder: OnnxEmbedder
) -> None:
    """The judge read the cidr row and passed "abbrev() returns 192.168.0.0/24", the row's
    cidr Output: with the judge passing everything (threshold 0), the row's columns still
    remove it."""
    passage = context_item(manual_tables["cidr"])
    written = "The abbrev() function returns 192.168.0.0/24 for the cidr input 192.168/24 [1]."
    settings = AnswerSettings(support_budget_s=120.0, support_threshold=0.0)
    answer = checked(written, CIDR_QUESTION, passage, smollm, embedder, settings)
    assert "".join(answer) == UNSUPPORTED
    (sentence,) = answer.support.sentences
    assert (sentence.shown, sentence.checked_by) == (False, "row"), sentence
    assert "from a row or column it does not name" in sentence.reason


@pytest.mark.models
@pytest.mark.parametrize(
    ("section", "question", "written", "reason"),
    [
        # The table's own words, about another row than the one asked.
        ("Numeric Types", "How many bytes does a bigint take?",
         "An integer takes 4 bytes [1].", "speaks of integer"),
        # "Its" is berth A1, the sentence it follows; the depth is B7's.
        ("Berths", "How long is berth A1?",
         "Berth A1 is 12 m long [1]. Its depth is 4.4 m [1].",
         "from a row or column it does not name"),
    ],
)  # fmt: skip
def test_a_sentence_is_read_of_the_row_it_names_or_points_back_to(
    manual_tables: dict[str, str],
    smollm: LlamaRuntime,
    embedder: OnnxEmbedder,
    section: str,
    question: str,
    written: str,
    reason: str,
) -> None:
    """With the judge passing everything (threshold 0), a row's value stated of another row
    is still removed: the question's row is not the one the sentence speaks of, or a
    sentence pointing back takes its subject from the sentence before it."""
    passage = context_item(manual_tables[section])
    settings = AnswerSettings(support_budget_s=120.0, support_threshold=0.0)
    answer = checked(written, question, passage, smollm, embedder, settings)
    "".join(answer)
    removed = answer.support.sentences[-1]
    assert (removed.shown, removed.checked_by) == (False, "row"), answer.support
    assert reason in removed.reason
    assert all(s.shown for s in answer.support.sentences[:-1])


@pytest.mark.models
def test_a_sentence_stating_part_of_a_rows_list_is_followed_by_the_whole_cell(
    manual_tables: dict[str, str], smollm: LlamaRuntime, embedder: OnnxEmbedder
) -> None:
    """One item of the list the question asks for is true and incomplete: the row's cell
    follows it in full. The check has no time for the judge here, so the sentence's terms
    decide it, as they would on a slow machine."""
    passage = context_item(manual_tables["Distributions"])
    question = "Which additional arguments does the negative binomial distribution take?"
    written = "The negative binomial distribution takes the additional argument mu [1]."
    settings = AnswerSettings(support_budget_s=0.0, support_terms_accept=0.8)
    answer = checked(written, question, passage, smollm, embedder, settings)
    shown = "".join(answer)
    assert shown == (
        f"{written} negative binomial \u2014 additional arguments: size, prob, mu [1]."
    ), answer.support
    assert [s.checked_by for s in answer.support.sentences] == ["budget", "row-cells"]
    # Said in full, the cell is not repeated.
    whole = (
        "The negative binomial distribution takes the additional arguments size, prob and mu [1]."
    )
    assert "".join(checked(whole, question, passage, smollm, embedder, settings)) == whole


NUMERIC_TYPES = """8.1. Numeric Types

Table 8.2. Numeric Types

Name | Storage Size | Description | Range

Table 8.2. Numeric Types: Name: integer; Storage Size: 4 bytes; Description: typical choice for integer; Range: -2147483648 to +2147483647

Table 8.2. Numeric Types: Name: bigint; Storage Size: 8 bytes; Description: large-range integer; Range: -9223372036854775808 to +9223372036854775807"""  # noqa: E501


@pytest.mark.parametrize(
    ("question", "sentence", "misplaced_value"),
    [
        # The heading's "8.1." and the caption's "Table 8.2" are no row's 8 bytes.
        ("What is the range of the PostgreSQL integer type?",
         "integer is stored in 8 bytes and ranges from -2147483648 to +2147483647.", True),
        # "large-range" is the description the sentence states, not the Range column named.
        ("How many bytes does a bigint take in PostgreSQL?",
         "bigint is the large-range integer type, stored in 8 bytes.", False),
    ],
)  # fmt: skip
def test_a_value_is_read_in_its_row_whatever_the_caption_numbers(
    question: str, sentence: str, misplaced_value: bool
) -> None:
    answered = answer_facts(sentence, question)
    assert misplaced(sentence, answered, NUMERIC_TYPES, facts, held_words) is misplaced_value
