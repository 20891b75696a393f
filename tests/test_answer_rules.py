"""The rules that read a checked sentence in its answer: a sentence that points back is read
with the one it points to, one that points forward is not shown, and an answer holds a
sentence that answers what was asked (`answer.pointing`, `answer.answering`).

The passages are short paraphrases of reference pages; the answers are given as the model's
pieces, so each test knows what the generator wrote. Every sentence whose fate a test
asserts is a passage's own words (a quote, decided without the judge) or fails on the rules,
so the small real judge (SmolLM2-135M) decides nothing asserted here. The cosines are the
real embedder's (all-MiniLM-L6-v2, int8, as a corpus uses it).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from crag_edge.answer.answering import read_against
from crag_edge.answer.checked import CheckedAnswer
from crag_edge.answer.generation import UNSUPPORTED, AnswerFinish
from crag_edge.answer.pointing import Said, pointer_fault, points_forward, statement_read
from crag_edge.answer.table_rows import unnamed_row
from crag_edge.config import AnswerSettings
from crag_edge.grading.rows import names
from crag_edge.models.chat_model import TextStream
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem, CragResult
from crag_edge.types import Action, Decision

VACUUM = {
    3: "The PARALLEL option lets VACUUM perform its index vacuum and index cleanup phases in "
    "parallel using background workers. This feature is known as parallel vacuum.",
    4: "VACUUM FULL rewrites the entire contents of the table into a new disk file with no "
    "extra space, allowing unused space to be returned to the operating system.",
    6: "The output of VACUUM VERBOSE differs between versions. For example, note the "
    "differences here:",
}
RULE_NOTES = {
    2: "In a rule for INSERT, UPDATE, or DELETE on a view, you can add a RETURNING clause "
    "that emits the view's columns. This clause will be used to compute the outputs if the "
    "rule is triggered by an INSERT RETURNING, UPDATE RETURNING, or DELETE RETURNING command "
    "respectively. When the rule is triggered by a command without RETURNING, the rule's "
    "RETURNING clause will be ignored. RETURNING queries on the view will be rejected if "
    "there is no RETURNING clause in any available rule.",
}
RULE_QUOTES = [
    "In a rule for INSERT, UPDATE, or DELETE on a view, you can add a RETURNING clause that "
    "emits the view's columns [2].",
    "This clause will be used to compute the outputs if the rule is triggered by an INSERT "
    "RETURNING, UPDATE RETURNING, or DELETE RETURNING command respectively [2].",
    "When the rule is triggered by a command without RETURNING, the rule's RETURNING clause "
    "will be ignored [2].",
    "RETURNING queries on the view will be rejected if there is no RETURNING clause in any "
    "available rule [2].",
]
SEQUENCE = {
    4: "If specified, the sequence is created as an unlogged sequence. Changes to unlogged "
    "sequences are not written to the write-ahead log. This option is mainly intended for "
    "sequences associated with unlogged tables via identity columns or serial columns.",
}
DELETE_QUESTION = "What does the RETURNING clause of DELETE return?"
UNLOGGED_QUESTION = "What happens to the contents of an UNLOGGED table after a crash?"


@pytest.fixture(scope="module")
def smollm(smollm_path: Path) -> Iterator[LlamaRuntime]:
    yield LlamaRuntime(smollm_path, model_id="smollm", n_ctx=2048, n_threads=1, timeout_s=120)


@pytest.fixture(scope="module")
def minilm(minilm_dir: Path, minilm_int8_onnx: Path) -> OnnxEmbedder:
    return OnnxEmbedder(minilm_int8_onnx, minilm_dir / "tokenizer.json", "minilm", threads=2)


def context(passages: dict[int, str]) -> list[ContextItem]:
    return [
        ContextItem(n, n, n, f"page{n}.html", "", 0, len(text), text, "corpus", 0.9)
        for n, text in passages.items()
    ]


def answered(
    llm: LlamaRuntime,
    question: str,
    passages: dict[int, str],
    sentences: list[str],
    embedder: OnnxEmbedder | None = None,
    settings: AnswerSettings | None = None,
) -> tuple[str, CheckedAnswer]:
    """The text a reader sees of `sentences` written from `passages`, and the check."""
    result = CragResult(
        question, Decision.AMBIGUOUS, Action.REFINE, 0.6, "kept", context(passages), []
    )

    def pieces() -> Generator[str, None, AnswerFinish]:
        for i, sentence in enumerate(sentences):
            yield from (f" {word}" if i or j else word for j, word in enumerate(sentence.split()))
        return "stop"

    settings = settings or AnswerSettings(support_budget_s=120.0)
    answer = CheckedAnswer(TextStream(pieces()), result, llm, settings, embedder=embedder)
    return "".join(answer), answer


# A judge that passes every sentence: what a test asserts is decided by the rules after it.
LENIENT = AnswerSettings(
    support_budget_s=120.0, support_threshold=0.0, support_threshold_located=0.0
)
CLONE = "What name does git clone give the remote that tracks the upstream repository?"
FEATURE = Said("This feature is known as parallel vacuum [3].", 3, True)
RESTATED = "Index vacuum phases run in parallel using background workers."


@pytest.mark.parametrize(
    ("before", "sentence", "passages", "fault"),
    [
        (  # the quote's "this feature" is parallel vacuuming in [3], not VACUUM FULL
            Said("VACUUM FULL rewrites the entire contents of the table [4].", 4, True),
            FEATURE,
            VACUUM,
            ("pointer", "points back to a sentence that passage [3] does not state"),
        ),
        (  # the same passage states both
            Said("VACUUM can vacuum indexes in parallel using background workers [3].", 3, True),
            FEATURE,
            VACUUM,
            None,
        ),
        (Said(f"{RESTATED} [5]", 5, True), FEATURE, {**VACUUM, 5: RESTATED}, None),  # [3] too
        (
            Said("VACUUM FULL takes 2 hours [4].", 4, False),
            FEATURE,
            VACUUM,
            ("orphan", "refers back to a removed sentence"),
        ),
        (
            None,
            Said("For example, note the differences here [6].", 6, True),
            VACUUM,
            ("pointer", "points to something the answer does not show"),
        ),
    ],
)
def test_a_pointer_is_read_with_what_it_points_to(
    before: Said | None, sentence: Said, passages: dict[int, str], fault: tuple[str, str] | None
) -> None:
    assert pointer_fault(sentence, before, passages) == fault


def test_a_sentence_ending_on_what_follows_points_forward() -> None:
    assert points_forward("Use the following command:")
    assert points_forward("For example, note the differences here [6].")
    assert not points_forward("The rows are stored in key order [6].")


def test_a_sentence_holding_the_questions_words_about_another_subject_does_not_address_it(
    minilm: OnnxEmbedder,
) -> None:
    def read(question: str, sentence: str) -> tuple[bool, bool]:
        def cosine(claim: str) -> float:
            first, second = minilm.embed([question, claim])
            return float(first @ second)

        asked = read_against(question, sentence, cosine)
        return asked.addresses, asked.answers

    for quote in RULE_QUOTES:
        assert read(DELETE_QUESTION, quote) == (False, False), quote
    answer = "The optional RETURNING clause causes DELETE to compute and return values [1]."
    assert read(DELETE_QUESTION, answer) == (True, True)
    sequence = "If specified, the sequence is created as an unlogged sequence [4]."
    assert read(UNLOGGED_QUESTION, sequence) == (False, False)
    truncated = "An unlogged table is automatically truncated after a crash [1]."
    assert read(UNLOGGED_QUESTION, truncated) == (True, True)


def test_a_question_asking_how_many_is_answered_by_a_number() -> None:
    question = "How many digits can a numeric have before the decimal point?"
    precision = "The precision of a numeric is the total count of significant digits [1]."
    assert read_against(question, precision).addresses
    assert not read_against(question, precision).answers
    digits = "A numeric can have up to 131072 digits before the decimal point [1]."
    assert read_against(question, digits).answers
    assert not read_against("How long is the window?", "It is two hours long.").answers  # a pointer
    assert read_against("How long is the window?", "The window is two hours long.").answers
    # How often: a place in an order or a frequency in words is the number asked for.
    often = "How often is the emergency generator tested?"
    assert read_against(often, "The emergency generator is tested every second Tuesday.").answers
    assert read_against(often, "The emergency generator is tested weekly.").answers
    assert not read_against(
        often, "The emergency generator is tested by the harbour master."
    ).answers
    assert not read_against("How many berths are there?", "Each berth is numbered.").answers
    # A question of nothing but frame words gives no focus to hold: any sentence may address it.
    assert read_against("What is the default?", "Readers continue while a writer appends.").answers


def test_a_question_asking_for_a_price_length_or_weight_is_not_answered_by_another_kind() -> None:
    """A number with a unit of another kind answers something else: the haul-out's
    default length is not what it costs."""
    cost = "How much does a slipway haul-out cost?"
    assert not read_against(cost, "The slipway haul-out cost is 8 metres [1].").answers
    assert read_against(cost, "A slipway haul-out costs 120 euros [1].").answers
    assert read_against(cost, "A slipway haul-out costs €120 [1].").answers
    assert read_against(cost, "A slipway haul-out costs 120 [1].").answers  # no unit: left alone
    depth = "How deep is the water at berth B7?"
    assert read_against(depth, "The water at berth B7 is 4.4 m deep [1].").answers
    assert not read_against(depth, "Berth B7 takes boats up to 12 tonnes of water [1].").answers
    # Sizes in bytes or bits are not a length: the width of a C type is its bits.
    width = "What is the width in bits of long int in the LP64 data model?"
    assert read_against(width, "The width of long int in LP64 is 64 bits [1].").answers
    # A quantity of the kind asked answers, whatever it is counted per.
    per_metre = "What is the price per metre of mooring rope?"
    assert read_against(per_metre, "Mooring rope is 3 euros per metre [1].").answers


def test_a_question_asking_who_is_answered_by_someone_named() -> None:
    approver = "Who has to approve a rollback of the database migration?"
    window = "The rollback window for the migration is two hours [1]."
    assert read_against(approver, window).addresses and not read_against(approver, window).answers
    assert read_against(approver, "Ana approves a rollback of the migration [1].").answers
    assert read_against(approver, "The database owner approves a rollback [1].").answers
    assert read_against(approver, "A rollback is approved by ops@example.org [1].").answers
    dns = "Who switches the DNS in the cutover?"
    assert read_against(dns, "Lena switches the DNS in the cutover [1].").answers
    # The question's own names are not an answer: "DNS" is what was asked about.
    assert not read_against(dns, "The DNS is switched in the cutover [1].").answers
    assert read_against("To whom is the report sent?", "The report is sent to Ana [2].").answers


LONGEST = "What is the default maximum length of a string or BLOB in SQLite?"
WAL_SIZE = "At what WAL file size does SQLite run a checkpoint automatically?"
BLAME = "Which option makes git blame ignore whitespace changes?"
PRUNE = "How long does git gc keep unreachable loose objects before pruning them?"


@pytest.mark.parametrize(
    ("question", "sentence", "answers"),
    [
        # A question naming a quantity is answered by a number.
        (LONGEST, "Applications should not increase the maximum string and blob length [1].",
         False),
        (LONGEST, "The default maximum length is 1,000,000,000 bytes [1].", True),
        (WAL_SIZE,
         "Moving the WAL file transactions back into the database is called a checkpoint [1].",
         False),
        (WAL_SIZE, "A checkpoint runs when the WAL file reaches 1000 pages.", True),
        # A function named for a quantity asks what it does, not how much.
        ("What is the count function used for in SQLite?",
         "count() returns the number of rows in a group [1].", True),
        # A question asking which option is answered by an option it does not name.
        (BLAME, "By default git blame uses 7+1 hexadecimal digits as the abbreviated object name.",
         False),
        (BLAME, "The -w option makes git blame ignore whitespace [1].", True),
        ("What does the -d option of git clean do?",
         "With -d, git clean recurses into directories [1].", True),
        ("Which flag goes with -d to make git clean remove directories?",
         "Use -d to make git clean remove directories [1].", False),
        # "How long" asks for a time or a length: a bare number says neither.
        (PRUNE, "The number of loose objects git gc keeps before pruning them is 6700 [4].",
         False),
        (PRUNE, "Git gc keeps unreachable loose objects for 2 weeks before pruning them [2].",
         True),
        ("How long is the rollback window of the migration?",
         "The rollback window of the migration is two hours [1].", True),
        ("How long is berth A1?", "Berth A1 is 12 m long [1].", True),
        # What a thing is, answered only by what sets it: the name is never said.
        (CLONE, "The name of the remote that tracks the upstream repository is given by the "
         "`-o` or `--origin` option [3].", False),
        (CLONE, "The remote is named origin; the `-o` option gives it another name [3].", True),
        (CLONE, "The remote is origin, which is set by clone.defaultRemoteName [3].", True),
        ("What is the default maximum number of bytes in a string or BLOB?",
         "The default maximum number of bytes in a string or BLOB is defined by the macro "
         "SQLITE_MAX_LENGTH, which defaults to 1 billion [7].", True),
        ("Which git stash subcommand applies a stashed state and removes it from the list?",
         "The default behaviour of git stash show is given by the stash.showStat and "
         "stash.showPatch config variables [1].", False),
        ("What is the default maximum host parameter number (SQLITE_MAX_VARIABLE_NUMBER) "
         "for SQLite versions after 3.32.0?",
         "The maximum host parameter number can be lowered at run-time using the "
         "sqlite3_limit(db,SQLITE_LIMIT_VARIABLE_NUMBER,size) interface [4].", False),
        ("What is the default maximum host parameter number (SQLITE_MAX_VARIABLE_NUMBER) "
         "for SQLite versions after 3.32.0?",
         "The maximum host parameter number is 32766 for SQLite versions after 3.32.0.", True),
        ("Which setting determines the fractional precision of the money type?",
         "The fractional precision of the money type is determined by the database's "
         "lc_monetary setting [1].", True),
    ],
)  # fmt: skip
def test_a_question_asking_for_a_quantity_or_an_option_is_answered_by_one(
    question: str, sentence: str, answers: bool
) -> None:
    read = read_against(question, sentence)
    assert read.addresses and read.answers is answers


@pytest.mark.models
def test_a_quote_pointing_back_to_another_passages_sentence_is_not_shown(
    smollm: LlamaRuntime,
) -> None:
    full = "VACUUM FULL rewrites the entire contents of the table into a new disk file [4]."
    feature = "This feature is known as parallel vacuum [3]."
    text, answer = answered(smollm, "What does VACUUM FULL do?", VACUUM, [full, feature])
    assert text == full
    first, second = answer.support.sentences
    assert first.checked_by == "quote" and first.shown
    assert second.checked_by == "pointer" and not second.shown
    assert second.reason == "points back to a sentence that passage [3] does not state"


@pytest.mark.parametrize(
    ("sentence", "before", "read"),
    [
        ("Its range is -9223372036854775808 to +9223372036854775807 [1].",
         "An integer takes 4 bytes [1].",
         "An integer takes 4 bytes. Its range is -9223372036854775808 to +9223372036854775807."),
        ("A bigint takes 8 bytes [1].", "An integer takes 4 bytes [1].",
         "A bigint takes 8 bytes."),
        ("This feature is known as parallel vacuum [3].", None,
         "This feature is known as parallel vacuum."),
    ],
)  # fmt: skip
def test_the_judge_reads_a_pointer_after_what_it_points_to(
    sentence: str, before: str | None, read: str
) -> None:
    assert statement_read(sentence, before) == read


@pytest.mark.models
def test_a_dangling_example_is_not_shown(smollm: LlamaRuntime) -> None:
    full = "VACUUM FULL rewrites the entire contents of the table into a new disk file [4]."
    dangling = "For example, note the differences here [6]."
    text, answer = answered(smollm, "What does VACUUM FULL do?", VACUUM, [full, dangling])
    assert text == full
    assert answer.support.sentences[1].reason == "points to something the answer does not show"


@pytest.mark.models
def test_quotes_that_answer_nothing_asked_leave_the_insufficient_evidence_reply(
    smollm: LlamaRuntime, minilm: OnnxEmbedder
) -> None:
    text, answer = answered(smollm, DELETE_QUESTION, RULE_NOTES, RULE_QUOTES, minilm)
    assert text == UNSUPPORTED and answer.finish_reason == "unsupported"
    assert len(answer.support.sentences) == 4
    for sentence in answer.support.sentences:
        assert not sentence.shown and sentence.passage == 2
        assert sentence.checked_by == "unasked" and "answers nothing" in sentence.reason


@pytest.mark.models
def test_an_option_of_another_subject_is_not_shown_for_the_question(
    smollm: LlamaRuntime, minilm: OnnxEmbedder
) -> None:
    sentences = [
        "If specified, the sequence is created as an unlogged sequence [4].",
        "This option is mainly intended for sequences associated with unlogged tables [4].",
    ]
    text, answer = answered(smollm, UNLOGGED_QUESTION, SEQUENCE, sentences, minilm)
    assert text == UNSUPPORTED
    assert [s.checked_by for s in answer.support.sentences] == ["unasked", "unasked"]


@pytest.mark.models
def test_a_sentence_supporting_one_that_answers_is_shown_with_it(
    smollm: LlamaRuntime, minilm: OnnxEmbedder
) -> None:
    passages = {
        1: "The optional RETURNING clause causes DELETE to compute and return value(s) based "
        "on each row actually deleted. Any expression using the table's columns can be "
        "computed. The syntax of the RETURNING list is identical to that of the output list "
        "of SELECT.",
    }
    sentences = [
        "The optional RETURNING clause causes DELETE to compute and return value(s) based on "
        "each row actually deleted [1].",
        "The syntax of the RETURNING list is identical to that of the output list of SELECT [1].",
        "Any expression using the table's columns can be computed [1].",
    ]
    text, answer = answered(smollm, DELETE_QUESTION, passages, sentences, minilm)
    assert text == " ".join(sentences)
    assert all(s.shown for s in answer.support.sentences)


WIDTHS = {
    1: "Type specifier | Equivalent type | Width in bits by data model\n\n"
    "Properties: Type specifier: unsigned long long int; Equivalent type: unsigned long "
    "long int (C++11); Width in bits by data model C++ standard: at least 64; Width in bits "
    "by data model LP32: 64; Width in bits by data model LLP64: 64; Width in bits by data "
    "model LP64: 64\n\nBesides the minimal bit counts, the C++ Standard guarantees that "
    "sizeof(char) <= sizeof(long long)."
}


@pytest.mark.parametrize(
    ("sentence", "question", "unnamed"),
    [  # the row's value borrowed for another type: its words are all in the passage
        ("The width in bits by data model LLP64 is 64 bits [1].", "How wide is char8_t?", True),
        ("An unsigned long long int is 64 bits wide in LLP64 [1].", "How wide is char8_t?", False),
        ("It is 64 bits wide under LLP64 [1].", "How wide is unsigned long long int?", False),
        ("The C++ Standard guarantees minimal bit counts [1].", "How wide is char8_t?", False),
    ],
)
def test_a_value_from_a_table_row_is_stated_of_the_rows_subject(
    sentence: str, question: str, unnamed: bool
) -> None:
    assert unnamed_row(sentence, question, WIDTHS[1]) is unnamed


@pytest.mark.parametrize(
    ("text", "subject", "named"),
    [
        ("The format character `q` is 8 bytes.", "q", True),
        ("Quite a quick question.", "q", False),
        ("The '!' prefix selects network order.", "!", True),
        ("Harbour Cafe got a discount.", "Harbour Cafe", True),
        ("An interval takes 16 bytes.", "interval [ fields ] [ (p) ]", True),
        ("The cafe got a discount.", "Harbour Cafe", False),
    ],
)
def test_a_subject_is_named_by_all_its_terms_or_as_a_word_of_its_own(
    text: str, subject: str, named: bool
) -> None:
    assert names(text, subject) is named


def test_a_row_value_borrowed_for_another_subject_is_not_shown(smollm: LlamaRuntime) -> None:
    """The row's own words pass as a quote without the judge; read out of their row, they
    say nothing of the type asked about."""
    borrowed = "Width in bits by data model LLP64: 64 [1]."
    question = "How many bits wide is char8_t in the Windows LLP64 data model?"
    text, answer = answered(smollm, question, WIDTHS, [borrowed])
    assert text == UNSUPPORTED
    [record] = answer.support.sentences
    assert record.checked_by == "row" and "without naming its subject" in record.reason


def test_a_passages_words_restated_of_another_subject_are_not_shown(
    smollm: LlamaRuntime, minilm: OnnxEmbedder
) -> None:
    """Whatever the judge says (here it passes everything), the generator's sentence said of
    the crane is not shown, and the sentence pointing back to it goes with it."""
    handbook = (
        "Power\n\nThe harbour\u2019s emergency generator runs on biodiesel and is tested every "
        "second Tuesday. Fuel for it is kept in the locked shed behind the crane."
    )
    sentences = [
        "The harbour crane runs on biodiesel and is tested every second Tuesday [1].",
        "Fuel for it is kept in the locked shed behind the crane [1].",
    ]
    question = "What fuel does the harbour crane run on?"
    text, answer = answered(smollm, question, {1: handbook}, sentences, minilm, LENIENT)
    assert text == UNSUPPORTED
    swapped, pointing = answer.support.sentences
    assert swapped.checked_by == "subject" and not swapped.shown
    assert "the harbour's emergency generator" in swapped.reason
    assert not pointing.shown


@pytest.mark.parametrize(
    ("question", "passage", "sentence", "reason"),
    [
        (  # pop's definition said of apply, the entry beside it
            "Which git stash subcommand applies a stashed state and removes it from the list?",
            "pop [--index] [<stash>]\n\nRemove a single stashed state from the stash list and "
            "apply it on top of the current working tree state.\n\napply [--index] [<stash>]"
            "\n\nLike pop, but do not remove the state from the stash list.",
            "The git stash apply command applies a stashed state and removes it from the "
            "stash list [1].",
            "says of apply what passage [1] says of pop",
        ),
        (  # rerere's value given to the reflog, which the passage never names
            "How long are reflog entries kept by default?",
            "gc.rerereResolved\n\nRecords of conflicted merge you resolved earlier are kept "
            "for this many days when git rerere gc is run. The default is 60 days.",
            "Reflog entries are kept for 60 days by default [1].",
            "gives gc.rerereResolved's value in passage [1] to reflog, which it never names",
        ),
        (  # prune named over remove, the sibling the question's verb names
            "Which command removes a linked working tree?",
            "If a working tree is deleted without using git worktree remove, then its "
            "administrative files will eventually be removed automatically, or you can run "
            "git worktree prune to clean up any stale administrative files.",
            "The command to remove a linked working tree is `git worktree prune` [1].",
            "names git worktree prune where passage [1] names git worktree remove",
        ),
    ],
)
def test_a_definition_lists_words_misread_by_the_answer_are_not_shown(
    smollm: LlamaRuntime,
    minilm: OnnxEmbedder,
    question: str,
    passage: str,
    sentence: str,
    reason: str,
) -> None:
    """Whatever the judge says (here it passes everything), the sentence is not shown."""
    text, answer = answered(smollm, question, {1: passage}, [sentence], minilm, LENIENT)
    assert text == UNSUPPORTED
    (record,) = answer.support.sentences
    assert record.checked_by == "entry" and not record.shown
    assert record.reason == reason
