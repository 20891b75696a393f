"""The support check: every shown sentence of an answer is one the context states.

The model's text is given as a stream of pieces, so each test knows what the generator
wrote; the LLM tier is the real small model (SmolLM2-135M), which answers "no" to nearly
every support question: whatever it decides, a test here relies only on what holds for any
judge (the cheap tier's decisions, the budget, the shape of the report).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from crag_edge.answer.checked import (
    CheckedAnswer,
    check_answer,
    complete_sentences,
    with_citation,
)
from crag_edge.answer.generation import UNSUPPORTED, AnswerFinish, answer_messages, stream_answer
from crag_edge.answer.pointing import fails_in_place
from crag_edge.answer.support import (
    candidates,
    check_messages,
    cited_numbers,
    cited_passage,
    claim_text,
    judged_part,
    literals,
    refers_back,
    stated,
    swapped_options,
    term_support,
    unheld_options,
)
from crag_edge.config import AnswerSettings, SupportMode
from crag_edge.models.chat_model import TextStream
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem, CragResult
from crag_edge.types import Action, Decision

PASSAGES = [
    "The write-ahead log lets readers continue while a writer appends changes to the log.",
    "A checkpoint copies the pages of the write-ahead log back into the database file. "
    "By default a checkpoint runs when the log reaches 1000 pages.",
]


def context() -> list[ContextItem]:
    return [
        ContextItem(n, n, n, f"doc{n}.md", "", 0, len(text), text, "corpus", 0.9)
        for n, text in enumerate(PASSAGES, start=1)
    ]


def result() -> CragResult:
    return CragResult(
        "How does the write-ahead log work?",
        Decision.CORRECT,
        Action.REFINE,
        0.9,
        "kept evidence",
        context(),
        [],
    )


def stream_of(pieces: list[str]) -> TextStream[AnswerFinish]:
    def generate() -> Generator[str, None, AnswerFinish]:
        yield from pieces
        return "stop"

    return TextStream(generate())


@pytest.fixture(scope="module")
def smollm(smollm_path: Path) -> Iterator[LlamaRuntime]:
    yield LlamaRuntime(smollm_path, model_id="smollm", n_ctx=2048, n_threads=1, timeout_s=120)


def checked(
    llm: LlamaRuntime,
    words: str,
    mode: SupportMode = "remove",
    budget: float = 60.0,
    threshold: float = AnswerSettings().support_threshold,
) -> tuple[list[str], CheckedAnswer]:
    settings = AnswerSettings(
        support_check=mode, support_budget_s=budget, support_threshold=threshold
    )
    first, *rest = words.split(" ")
    answer = CheckedAnswer(stream_of([first, *(" " + w for w in rest)]), result(), llm, settings)
    return list(answer), answer


def test_citations_are_read_and_stripped() -> None:
    sentence = "Readers continue while a writer appends [1][2]."
    assert cited_numbers(sentence) == (1, 2)
    assert claim_text(sentence) == "Readers continue while a writer appends."


def test_a_sentence_is_complete_once_the_next_one_starts_and_keeps_its_trailing_citation() -> None:
    text = "Readers continue. [1] A checkpoint copies pages"
    spans = complete_sentences(text, final=False)
    assert [text[a:b] for a, b in spans] == ["Readers continue. [1]"]
    final = complete_sentences(text, final=True)
    assert [text[a:b] for a, b in final][-1] == "A checkpoint copies pages"


def test_term_support_names_each_passage_share_and_numbers_no_passage_holds() -> None:
    terms = term_support("A checkpoint runs when the log reaches 2000 pages [1].", context())
    assert terms.shares[2] > terms.shares[1]
    assert terms.missing == ("2000",)
    assert term_support("It runs at 1000 pages.", context()).missing == ()


def test_a_name_no_passage_holds_is_missing_as_a_number_is() -> None:
    """Asked about another product, a small model names it beside this one's passage."""
    other = term_support("In Fossil, `fossil open` checks out a repository [1].", context())
    assert other.missing == ("fossil", "open")
    same = term_support("The Write-ahead log lets `readers` continue [1].", context())
    assert same.missing == ()  # a name is found whatever its case; the first word is any word
    # A name the corpus holds elsewhere (its own subject, on a page that does not repeat it)
    # is left to the LLM.
    subject = term_support(
        "In SQLite a checkpoint copies the log [2].", context(), {"SQLite"}.__contains__
    )
    assert subject.missing == ()


def test_a_passages_own_words_are_a_quote_and_a_turned_clause_is_not() -> None:
    quoted = term_support(
        "By default a checkpoint runs when the log reaches 1000 pages, as stated in [2].", context()
    )
    assert quoted.quoted == 2
    # Every word of the passage, but opened with a clause the passage does not have.
    turned = term_support(
        "If not, a checkpoint runs when the log reaches 1000 pages [2].", context()
    )
    assert turned.quoted is None
    assert term_support("The log reaches 1000 pages [2].", context()).quoted == 2
    assert term_support("Log reaches 1000 pages [2].", context()).quoted is None  # too short


@pytest.mark.models
def test_a_quote_is_shown_without_asking_the_llm(smollm: LlamaRuntime) -> None:
    words = "The write-ahead log lets readers continue while a writer appends changes [1]."
    pieces, answer = checked(smollm, words, threshold=1.0)  # no LLM score could pass it
    assert "".join(pieces) == words
    (sentence,) = answer.support.sentences
    assert sentence.checked_by == "quote" and sentence.passage == 1 and sentence.supported
    assert answer.support.judge_calls == 0 and answer.support.to_dict()["judge_calls"] == 0


def test_a_pointer_followed_only_by_words_about_the_passages_says_nothing() -> None:
    assert term_support("This option is described in [1].", context()).meta
    assert term_support("It is found in the context passage.", context()).meta
    # Read after the sentence it points to, a pointer saying only where is still nothing.
    assert term_support("This function is defined in [1].", context()).meta
    assert not term_support("This option copies the log [2].", context()).meta


def test_a_sentence_pointing_back_to_a_failed_one_fails_with_it() -> None:
    sentences = [
        ("Mercurial restores shelved changes with `hg unshelve`.", False),
        ("This command is described in [1].", True),
        ("It also keeps the log [1].", True),
        ("A checkpoint copies the pages [2].", True),
        ("This happens at 1000 pages [2].", True),
    ]
    assert fails_in_place(sentences) == [1, 2]
    assert refers_back("`This` is [1].") and not refers_back("Thistle grows [1].")


def test_the_cited_passage_is_asked_first_then_the_best_other() -> None:
    terms = term_support("A writer appends the log's pages to the database file.", context())
    assert terms.shares[1] < terms.shares[2] and candidates(terms, [1]) == [1, 2]
    assert candidates(terms, []) == [2, 1]
    assert candidates(terms, [7]) == [2, 1]  # a number the context does not have is ignored


def test_a_cited_passage_holding_few_of_the_sentences_words_goes_after_the_best() -> None:
    """The small model cites [1] for what [2] states; the judge would pass it on either, and
    the first passage that passes is the one the reader is sent to."""
    terms = term_support("A checkpoint copies the log's pages into the database file.", context())
    assert terms.shares[1] < terms.shares[2] / 2
    assert candidates(terms, [1]) == [2, 1]


def test_a_number_the_question_states_is_the_readers_and_never_missing() -> None:
    sentence = "A checkpoint does not wait for 5000 pages."
    assert term_support(sentence, context()).missing == ("5000",)
    asked = "Does a checkpoint wait for 5000 pages?"
    assert term_support(sentence, context(), question=asked).missing == ()
    fossil = "How do I open a Fossil repository?"  # a name is not vouched for by being asked
    assert term_support("Open it in Fossil [1].", context(), question=fossil).missing == ("Fossil",)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("The format string is %(process)d, as stated in the table.", ["%(process)d"]),
        ("abbrev() gives 192.168.0/24 for (192.168/24).", ["abbrev", "192.168.0/24", "192.168/24"]),
        ("The dense_rank() function ranks rows without gaps.", ["dense_rank"]),  # a call
        ("Call it with () or [].", []),  # brackets alone name nothing
        ("It is -a (from the passage).", []),  # brackets and punctuation around words
        ("Its config lives in ~/.aptitude/config, e.g. on x86-64.", ["~/.aptitude/config"]),
    ],
)
def test_a_literal_is_a_token_written_with_symbols_inside(text: str, found: list[str]) -> None:
    assert literals(text) == found


OPTIONS = "Specify -d to remove untracked directories too; --dry-run only lists them."


def test_a_sentence_is_located_where_one_passage_holds_its_facts_and_most_of_its_words() -> None:
    asked = "When does a checkpoint run by default?"
    runs = "A checkpoint runs by default once the log holds 1000 pages."
    terms = term_support(runs, context(), question=asked)
    assert terms.located == (2,)
    assert candidates(terms, [1]) == [2, 1]  # where its facts are, before where it points
    # Its one fact is the question's own: the passage must hold the answer, not the question.
    only_asked = term_support(runs, context(), question="What happens at 1000 pages?")
    assert only_asked.located == ()
    options = [ContextItem(1, 1, 1, "clean.md", "", 0, len(OPTIONS), OPTIONS, "corpus", 0.9)]
    asked = "Which option removes untracked directories?"
    right = term_support("The -d option removes untracked directories.", options, question=asked)
    assert right.located == (1,)
    # A word that turns what it says must be the passage's too: "If not, X" of "X when …".
    trusted = "The evidence is trusted as CORRECT when the best passage scores at least 0.5."
    decisions = [ContextItem(1, 1, 1, "crag.md", "", 0, len(trusted), trusted, "corpus", 0.9)]
    asked = "When is the evidence trusted?"
    turned = "If not, the evidence is trusted as CORRECT when it scores at least 0.5."
    assert term_support(turned, decisions, question=asked).located == ()
    plain = "The evidence is trusted as CORRECT when the best passage scores 0.5 or more."
    assert term_support(plain, decisions, question=asked).located == (1,)
    # A number written as a word is a fact as one in digits is.
    fog = "In fog, a vessel sounds one prolonged blast at intervals of not more than two minutes."
    chapter = [ContextItem(1, 1, 1, "book.epub", "", 0, len(fog), fog, "corpus", 0.9)]
    asked = "What sound signal does a vessel make in fog?"
    heard = "A vessel in fog sounds one prolonged blast at most every two minutes, not more."
    assert term_support(heard, chapter, question=asked).located == (1,)
    wrong = "A vessel in fog sounds three prolonged blasts at most every two minutes, not more."
    assert term_support(wrong, chapter, question=asked).located == ()
    # A fact is a whole word or option: "-n" is not in the passage, nor "-dry" in "--dry-run".
    for other in ("-n", "-dry"):
        wrong = term_support(f"The {other} option removes untracked directories.", options)
        assert wrong.located == ()


def test_a_located_sentence_needs_less_of_the_judge_and_is_cited_where_it_is_located() -> None:
    runs = "A checkpoint runs by default once the log holds 1000 pages."
    terms = term_support(runs, context(), question="When does a checkpoint run?")
    assert terms.located == (2,)
    assert stated(terms, (2, 0.7), 0.77, 0.65) and cited_passage(terms, (2, 0.7), 0.77) == 2
    # The judge's score on another passage counts, but the passage holding its facts is cited.
    assert stated(terms, (1, 0.7), 0.77, 0.65) and cited_passage(terms, (1, 0.7), 0.77) == 2
    assert cited_passage(terms, (1, 0.8), 0.77) == 1  # passed on its own score
    assert not stated(terms, (2, 0.6), 0.77, 0.65)
    assert stated(terms, (1, 0.8), 0.77, 0.65) and not stated(terms, None, 0.77, 0.65)
    nowhere = term_support("A checkpoint runs when the server decides.", context())
    assert nowhere.located == ()
    assert not stated(nowhere, (1, 0.7), 0.77, 0.65) and stated(nowhere, (1, 0.8), 0.77, 0.65)
    wrong = term_support("A checkpoint runs at 5000 pages.", context())
    assert not stated(wrong, (2, 0.99), 0.77, 0.65)  # a number no passage holds: never


def test_a_citation_is_placed_before_the_closing_punctuation() -> None:
    assert with_citation("Readers continue [2].", 1) == "Readers continue [1]."
    assert with_citation("Readers continue", 1) == "Readers continue [1]"


@pytest.mark.models
def test_a_sentence_is_checked_against_the_passage_holding_its_terms_and_cites_it(
    smollm: LlamaRuntime,
) -> None:
    words = "A checkpoint copies the pages of the log into the database file."
    pieces, answer = checked(smollm, words)
    (sentence,) = answer.support.sentences
    assert sentence.checked_by == "llm" and sentence.passage == 2
    # One pair asked, and a second only for a sentence the first left unsupported.
    assert answer.support.judge_calls == (1 if sentence.supported else 2)
    if sentence.supported:  # the small judge's call; the citation follows it either way
        assert "".join(pieces) == words[:-1] + " [2]." and answer.finish_reason == "stop"
    else:
        assert "".join(pieces) == UNSUPPORTED and answer.finish_reason == "unsupported"


@pytest.mark.models
def test_a_wrong_number_is_removed_and_listed_with_why(smollm: LlamaRuntime) -> None:
    words = "A checkpoint copies the pages of the log into the database file [2]. " \
        "By default a checkpoint runs when the log reaches 5000 pages [2]."  # fmt: skip
    pieces, answer = checked(smollm, words)
    assert "5000" not in "".join(pieces)
    (wrong,) = [s for s in answer.support.sentences if "5000" in s.text]
    assert not wrong.shown and wrong.checked_by == "terms" and "5000" in wrong.reason


@pytest.mark.models
def test_flag_shows_the_failing_sentence_marked_and_keep_shows_it_as_written(
    smollm: LlamaRuntime,
) -> None:
    words = "A checkpoint runs when the log reaches 5000 pages [2]."
    flagged, _ = checked(smollm, words, mode="flag")
    assert "".join(flagged).endswith("(unsupported)") and "5000" in "".join(flagged)
    kept, answer = checked(smollm, words, mode="keep")
    assert "".join(kept) == words
    assert answer.support.sentences[0].supported is False


@pytest.mark.models
def test_an_answer_with_no_supported_sentence_is_the_insufficient_evidence_reply(
    smollm: LlamaRuntime,
) -> None:
    pieces, answer = checked(smollm, "Brazil won the 2018 World Cup, as stated in [1].")
    assert "".join(pieces) == UNSUPPORTED
    assert answer.finish_reason == "unsupported"
    assert answer.support.supported_share is None


@pytest.mark.models
def test_with_no_time_left_the_terms_decide_and_say_so(smollm: LlamaRuntime) -> None:
    _, answer = checked(smollm, "Readers of the log wait for nothing at all.", budget=0.0)
    (sentence,) = answer.support.sentences
    assert sentence.checked_by == "budget" and not sentence.supported
    assert "not checked in time" in sentence.reason


@pytest.mark.models
def test_a_repeated_sentence_and_a_stray_citation_are_not_shown_twice(smollm: LlamaRuntime) -> None:
    words = "A checkpoint runs at 1000 pages [2]. A checkpoint runs at 1000 pages [1]. , [2]"
    _, answer = checked(smollm, words)
    first, second = answer.support.sentences  # its citation aside, the second is the first
    assert first.text.startswith("A checkpoint") and first.checked_by == "llm"
    assert second.checked_by == "repeat" and not second.shown


@pytest.mark.models
def test_a_sentence_that_says_nothing_or_only_speaks_of_the_passages_is_not_shown(
    smollm: LlamaRuntime,
) -> None:
    words = "A checkpoint runs at 1000 pages [2]. This is the evidence from [2]. This is [1]."
    _, answer = checked(smollm, words, mode="flag")
    first, *said_nothing = answer.support.sentences
    assert first.checked_by == "llm" and len(said_nothing) == 2
    for sentence in said_nothing:
        assert sentence.checked_by == "meta" and not sentence.shown
        assert "speaks of the passages" in sentence.reason


@pytest.mark.models
def test_a_sentence_leaning_on_a_removed_one_is_removed_with_it(smollm: LlamaRuntime) -> None:
    words = "A checkpoint runs when the log reaches 5000 pages [2]. " \
        "This copies the pages of the write-ahead log back into the database file [2]."  # fmt: skip
    pieces, answer = checked(smollm, words, threshold=0.0)  # whatever the judge says of it
    assert "".join(pieces) == UNSUPPORTED
    wrong, leaning = answer.support.sentences
    assert wrong.checked_by == "terms" and leaning.checked_by == "orphan"
    assert not leaning.shown and leaning.reason == "refers back to a removed sentence"


@pytest.mark.models
def test_a_reply_continued_from_its_own_beginning_goes_on_as_it_would_have(
    smollm: LlamaRuntime,
) -> None:
    """The pause after the first sentence: the model, given the start of its own answer,
    writes the rest it would have written (greedy decoding, the same tokens)."""
    messages = answer_messages("How does the write-ahead log work?", context())
    whole = "".join(smollm.stream_chat(messages, max_tokens=40))
    cut = whole.index(" ", len(whole) // 3)
    rest = "".join(smollm.stream_chat(messages, max_tokens=40, prefix=whole[:cut]))
    assert rest[:12] == whole[cut : cut + 12]


@pytest.mark.models
def test_a_checked_answer_pauses_the_model_for_its_first_sentence_and_carries_on(
    smollm: LlamaRuntime,
) -> None:
    settings = AnswerSettings(support_check="keep", support_budget_s=60.0)
    answer = check_answer(stream_answer(smollm, result()), result(), smollm, settings)
    text = "".join(answer)
    assert answer.finish_reason in ("stop", "length")
    texts = [s.text for s in answer.support.sentences]
    assert texts and answer.support.sentences[0].checked_by == "llm"
    assert len(set(texts)) == len(texts)  # carried on: the first sentence was not rewritten
    assert text.startswith(texts[0])


AGAIN = "The log file is named after the database file, with the suffix -wal appended."


def trusted_with_reread(decision: Decision = Decision.CORRECT) -> CragResult:
    answered = result()
    answered.decision = decision
    answered.reread = [ContextItem(3, 3, 3, "doc3.md", "", 0, len(AGAIN), AGAIN, "corpus", 0.5)]
    return answered


@pytest.mark.models
def test_an_unstated_answer_from_trusted_evidence_is_written_again_from_the_reread(
    smollm: LlamaRuntime,
) -> None:
    """The first answer names what no passage holds; the second, from the evidence read
    again, quotes it: the reader sees the second, cited by its passage, and the report lists
    both."""
    trusted = trusted_with_reread()
    settings = AnswerSettings(support_budget_s=60.0)

    def reread() -> CheckedAnswer:
        page = trusted.read_again()
        pieces = AGAIN.removesuffix(".").split(", ")
        again = stream_of([pieces[0], ", " + pieces[1] + "."])
        return CheckedAnswer(again, page, smollm, settings)

    first = stream_of(["The log is kept by Fossil [1]."])
    answer = CheckedAnswer(first, trusted, smollm, settings, reread=reread)
    assert "".join(answer) == AGAIN.removesuffix(".") + " [3]."
    assert answer.finish_reason == "stop"
    assert answer.support.reread and answer.support.held_s is not None
    removed, shown = answer.support.sentences
    assert removed.checked_by == "terms" and not removed.shown
    assert shown.checked_by == "quote" and shown.passage == 3
    assert "written again" in answer.support.summary()
    assert [item.n for item in trusted.context] == [1, 2, 3]  # the reader's sources hold [3]
    assert trusted.corrections[-1].type == "reread" and trusted.reread == []


@pytest.mark.models
def test_an_empty_answer_read_again_leaves_the_insufficient_evidence_reply(
    smollm: LlamaRuntime,
) -> None:
    trusted = trusted_with_reread()
    settings = AnswerSettings(support_budget_s=60.0)

    def reread() -> CheckedAnswer:
        return CheckedAnswer(stream_of([]), trusted.read_again(), smollm, settings)

    first = stream_of(["The log is kept by Fossil [1]."])
    answer = CheckedAnswer(first, trusted, smollm, settings, reread=reread)
    assert "".join(answer) == UNSUPPORTED and answer.finish_reason == "unsupported"
    assert answer.support.reread and len(answer.support.sentences) == 1


@pytest.mark.models
@pytest.mark.parametrize("decision", [Decision.CORRECT, Decision.AMBIGUOUS])
def test_evidence_is_read_again_only_when_trusted_and_when_the_setting_allows(
    smollm: LlamaRuntime, decision: Decision
) -> None:
    """AMBIGUOUS evidence is where off-corpus questions end: an answer the check empties there
    is not written again from more text."""
    for allowed in (True, False):
        trusted = trusted_with_reread(decision)
        settings = AnswerSettings(support_budget_s=60.0, support_reread=allowed)
        first = stream_of(["The log is kept by Fossil [1]."])
        answer = check_answer(first, trusted, smollm, settings)
        text = "".join(answer)
        turned = allowed and decision == Decision.CORRECT
        assert answer.support.reread == turned
        assert len(trusted.context) == (3 if turned else 2)
        if not turned:
            assert text == UNSUPPORTED and answer.finish_reason == "unsupported"
            continue
        # The second answer is the small model's own, from passage [3] alone, and checked.
        assert answer.support.sentences[0].checked_by == "terms"
        assert len(answer.support.sentences) >= 2
        shown = [s for s in answer.support.sentences if s.shown]
        assert all(s.supported and s.passage == 3 for s in shown)


REFLOG = (
    "The setting gc.reflogExpire says how long entries are kept. "
    "Reflog entries older than this time are removed; it defaults to 90 days. "
    "The setting gc.reflogExpireUnreachable covers the entries no tip reaches. "
    "It defaults to 30 days. "
    "Records of resolved merges are kept for 60 days."
)


def test_the_judge_reads_the_lines_holding_the_sentences_words() -> None:
    """The part of a passage the judge reads is the sentence holding most of the checked
    sentence's words, with one on either side; nothing beyond them."""
    item = ContextItem(3, 1, 1, "git-gc.html", "", 0, len(REFLOG), REFLOG, "corpus", 0.9)
    part = judged_part(item, "Reflog entries older than 90 days are removed.")
    assert part.text == (
        "The setting gc.reflogExpire says how long entries are kept. "
        "Reflog entries older than this time are removed; it defaults to 90 days. "
        "The setting gc.reflogExpireUnreachable covers the entries no tip reaches."
    )
    assert (part.n, part.title) == (3, item.title)


def test_the_judge_asked_about_one_passage_reads_only_its_part() -> None:
    first = ContextItem(1, 1, 1, "doc1.md", "", 0, len(PASSAGES[0]), PASSAGES[0], "corpus", 0.9)
    third = ContextItem(3, 1, 1, "git-gc.html", "", 0, len(REFLOG), REFLOG, "corpus", 0.9)
    statement = "Records of resolved merges are kept for 60 days."
    whole = check_messages([first, third], statement, 3)[1]["content"]
    piece = check_messages([first, third], statement, 3, reads="piece")[1]["content"]
    assert PASSAGES[0] in whole and REFLOG in whole
    assert PASSAGES[0] not in piece and "[1]" not in piece
    assert "It defaults to 30 days. Records of resolved merges" in piece
    assert "Reflog entries older than this time" not in piece
    assert "Does passage [3] state" in piece


def test_the_judge_reads_a_table_row_alone_and_not_by_its_reference() -> None:
    """A row with its column names is whole: its neighbours' cells are what a judge mixes
    up; and "Table 8.20" says where a value is, so it picks no row."""
    rows = (
        "Geometric Types: Name: path; Storage Size: 16+16n bytes; Description: Open path\n\n"
        "Table 8.20. Geometric Types: Name: circle; Storage Size: 24 bytes; Description: Circle"
    )
    item = ContextItem(1, 1, 1, "types.epub", "", 0, len(rows), rows, "corpus", 0.9)
    part = judged_part(item, "The PostgreSQL circle takes 24 bytes, as stated in Table 8.20.")
    assert part.text == "Geometric Types: Name: circle; Storage Size: 24 bytes; Description: Circle"


def test_the_judge_reads_the_row_holding_the_sentences_value() -> None:
    """Every row repeats its column names, so the row sharing most words with a sentence
    can be another's; the row holding the value the sentence states is the one it speaks
    of."""
    rows = (
        "LogRecord attributes: Attribute name: msg; Format: You shouldn't need to format this "
        "yourself.; Description: The format string passed in the original logging call.\n\n"
        "LogRecord attributes: Attribute name: process; Format: %(process)d; "
        "Description: Process ID (if available)."
    )
    item = ContextItem(1, 1, 1, "logging.html", "", 0, len(rows), rows, "corpus", 0.9)
    statement = (
        "The format string that puts the process ID into a log record's message is %(process)d [1]."
    )
    part = judged_part(item, statement)
    assert "Attribute name: process; Format: %(process)d" in part.text
    assert "msg" not in part.text


RESET_EXAMPLE = "You can remove the file from the index while keeping your changes with git reset."
RM_CACHED = "Use git rm --cached to unstage and remove paths only from the index."


@pytest.mark.parametrize(
    ("question", "sentence", "passage", "unheld"),
    [
        # git rm's option, credited to git reset's example: the lines never name it.
        ("How do I remove a file from the index only, keeping it in the working tree?",
         "Use the `git reset` command with the `--cached` option.", RESET_EXAMPLE,
         ["--cached"]),
        ("How do I remove a file from the index only, keeping it in the working tree?",
         "Use `git rm --cached` to remove it from the index only.", RM_CACHED, []),
        # The question's own option is the reader's, not a fact the answer adds.
        ("What does git rm --cached do?", "With --cached, git rm keeps the working tree file.",
         RESET_EXAMPLE, []),
        # A short option is not found inside a long one ("-d" in "--dry-run").
        ("Which option makes git clean remove directories?", "The -d option does.",
         "Use --dry-run to see what would be removed.", ["-d"]),
    ],
)  # fmt: skip
def test_an_option_is_held_by_the_passage_credited_with_it(
    question: str, sentence: str, passage: str, unheld: list[str]
) -> None:
    assert unheld_options(sentence, question, passage) == unheld


BLAME_OPTIONS = (
    "-s\nSuppress the author name and timestamp from the output.\n\n"
    "-e\nShow the author email instead of the author name (default off).\n\n"
    "-w\nIgnore whitespace when comparing the parent's version and the child's to find where "
    "the lines came from.\n\n"
    "--abbrev=<n>\nInstead of using the default 7+1 hexadecimal digits as the abbreviated "
    "object name, use <m>+1 digits."
)
CLONE_DEPTH = (
    "--single-branch\nClone only the history leading to the tip of a single branch. "
    "Further fetches will only update the remote-tracking branch. This is implied by "
    "--depth unless --no-single-branch is given."
)


@pytest.mark.parametrize(
    ("sentence", "passage", "swapped"),
    [
        # -s is in the passage, but the lines about ignoring whitespace are -w's.
        ("The -s option makes git blame ignore whitespace when comparing versions.",
         BLAME_OPTIONS, ["-s"]),
        ("The -w option makes git blame ignore whitespace when comparing versions.",
         BLAME_OPTIONS, []),
        # One of the options named is in the lines: the judge reads how they relate.
        ("--depth implies --single-branch unless --no-single-branch is given.",
         CLONE_DEPTH, []),
    ],
)  # fmt: skip
def test_an_option_is_named_by_the_lines_where_the_sentences_words_are(
    sentence: str, passage: str, swapped: list[str]
) -> None:
    item = ContextItem(1, 1, 0, "git-blame(1)", "", 0, len(passage), passage, "corpus", 0.9)
    assert swapped_options(sentence, "Which option makes git blame ignore whitespace?", item) == (
        swapped
    )
