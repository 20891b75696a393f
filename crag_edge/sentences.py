"""Where sentences end, and which runs of them stand alone: one definition shared by chunk
boundaries, refinement strips and what the LLM judge reads of a long passage.

A sentence ends at . ! ? (or a CJK full stop), optionally closed by quotes or brackets, before
whitespace; a blank line ends one too, and so does a line that starts a list item ("- ",
"* ", "1. ", "2) "), whose marker belongs to the item it opens. An ellipsis does not: it
stands mid-sentence as often as at the end. A piece that starts with a lowercase letter
continues the sentence before it ("in S. cerevisiae", "smokers vs. non-smokers", "e.g. the"):
a real sentence rarely starts lowercase, an abbreviation's period often precedes one (804 of
the 48,127 pieces of SciFact's abstracts split at every terminator). Abbreviations before a
capital ("Fig. 2", "Dr. Smith") still split early, which costs a strip, not a fact.
"""

from __future__ import annotations

import re
from itertools import pairwise

_TERMINATORS = ".!?\u3002\uff01\uff1f"
_CLOSERS = "\"'\u201d\u2019)\\]"
# A sentence strip shorter than this ("index.", "Fig.", a heading) joins a neighbour: alone it
# carries no fact, its keyword coverage is noise, and it shreds the context the model reads.
MIN_STRIP_WORDS = 4
MIN_STRIP_CHARS = 20
# A label (heading, option, term) of up to this many words always introduces the next piece.
MAX_LABEL_WORDS = 12
# A list item of up to this many words is one strip: its later sentences lean on its first
# ("- INCORRECT: nothing relevant was found. ... it reports insufficient evidence"), and kept
# alone they say something else. A longer item is split into sentences like any paragraph.
MAX_ITEM_WORDS = 64
# A definition list's term is at most this long and does not end with one of these.
TERM_MAX_CHARS = 40
TERM_ENDS = ".:;?!"
_ITEM_MARKER = r"[ \t]*(?:[-*+\u2022]|\d{1,3}[.)])"
# `gap`: the whitespace after a terminator and its closers; the other branches: a blank line,
# a line break before a list item.
_SEPARATOR = re.compile(
    f"(?<=[{_TERMINATORS}])[{_CLOSERS}]*(?P<gap>\\s+)|\\n\\s*\\n|\\n(?={_ITEM_MARKER}[ \t]+\\S)"
)
_BARE_MARKER = re.compile(_ITEM_MARKER)
_ITEM_START = re.compile(f"^{_ITEM_MARKER}[ \t]+(?=\\S)", re.MULTILINE)
_BLANK_LINE = re.compile(r"\n\s*\n")
_ENDS_SENTENCE = re.compile(f"[{_TERMINATORS}][{_CLOSERS}]*$")


def sentence_spans(text: str, *, join_continuations: bool = True) -> list[tuple[int, int]]:
    """(start, end) of every sentence of `text`, trimmed of whitespace, in order.

    With `join_continuations=False` every terminator before whitespace splits, which
    reproduces the sentence indices SciFact's rationale annotations refer to."""
    spans: list[tuple[int, int]] = []
    begin, after_blank = 0, True
    for match in _SEPARATOR.finditer(text):
        end = match.start("gap") if match.group("gap") is not None else match.start()
        if join_continuations and _is_item_number(text, begin, end):
            continue
        _add_piece(text, spans, begin, end, join_continuations and not after_blank)
        begin, after_blank = match.end(), match.group().count("\n") >= 2
    _add_piece(text, spans, begin, len(text), join_continuations and not after_blank)
    return spans


def _is_item_number(text: str, begin: int, end: int) -> bool:
    """Whether text[begin:end] is the "1." that opens a numbered list item at a line's start
    (not a sentence of its own: it belongs to the item). Looks back over spaces only, so a
    long text without line breaks costs no more than one without numbers."""
    if _BARE_MARKER.fullmatch(text, begin, end) is None:
        return False
    before = begin
    while before > 0 and text[before - 1] in " \t":
        before -= 1
    return before == 0 or text[before - 1] == "\n"


def list_item_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every list item of `text`: from its marker to the next item, a blank
    line or the end of the text, trimmed of whitespace."""
    starts = [match.start() for match in _ITEM_START.finditer(text)]
    items = []
    for i, start in enumerate(starts):
        limit = starts[i + 1] if i + 1 < len(starts) else len(text)
        blank = _BLANK_LINE.search(text, start, limit)
        item = _trimmed(text, start, blank.start() if blank else limit)
        if item[0] < item[1]:
            items.append(item)
    return items


def ends_sentence(piece: str) -> bool:
    """Whether `piece` ends with a sentence terminator (headings and labels do not)."""
    return _ENDS_SENTENCE.search(piece.rstrip()) is not None


def _add_piece(
    text: str, spans: list[tuple[int, int]], begin: int, end: int, may_continue: bool
) -> None:
    """Append text[begin:end] trimmed, or extend the previous sentence when it continues it."""
    begin, end = _trimmed(text, begin, end)
    if begin == end:
        return
    if may_continue and spans and text[begin].islower():
        spans[-1] = (spans[-1][0], end)
    else:
        spans.append((begin, end))


def _trimmed(text: str, begin: int, end: int) -> tuple[int, int]:
    """text[begin:end] without its leading and trailing whitespace, as offsets."""
    while begin < end and text[begin].isspace():
        begin += 1
    while end > begin and text[end - 1].isspace():
        end -= 1
    return begin, end


def sentence_strips(text: str, *, mid_document: bool) -> list[tuple[int, int]]:
    """(start, end) in `text` of its sentence strips: whole sentences, none below the minimum.

    A later chunk of a document (`mid_document`) whose first piece starts lowercase starts
    mid-sentence, where a chunk boundary fell inside a sentence too long for one chunk (or in
    a corpus chunked without sentence starts). That continuation stays a strip of its own when
    it reaches the minimum, since it may hold the fact asked for; a shorter one is dropped:
    a sentence's last few words say nothing alone, and joining them to the next sentence would
    make that strip start mid-sentence too.
    """
    spans = sentence_spans(text)
    lead: list[tuple[int, int]] = []
    if mid_document and spans and text[spans[0][0]].islower():
        continuation = spans.pop(0)
        lead = [] if _is_short(text, continuation) else [continuation]
    return lead + _join_short(text, _whole_items(text, spans))


def _whole_items(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` with the sentences of each list item of up to `MAX_ITEM_WORDS` words merged
    into one span (a chunk that starts inside an item keeps that item's sentences in it)."""
    return _merged_within(spans, _short(text, list_item_spans(text)))


def whole_definitions(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` with each definition of up to `MAX_ITEM_WORDS` words merged with its term into
    one span, as a list item is: "--format=<fmt>" then "Format of the resulting archive.
    Possible values are tar, zip, tar.gz, tgz, …" is one option's entry, and its second
    sentence, kept alone, neither names the option nor shares the question's words."""
    return _merged_within(spans, _short(text, definition_spans(text)))


def _short(text: str, items: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [item for item in items if len(text[item[0] : item[1]].split()) <= MAX_ITEM_WORDS]


def _merged_within(
    spans: list[tuple[int, int]], items: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """`spans` (in order) with each span that starts inside one of `items` (in order, not
    overlapping) merged into the span before it when that one reaches into the same item."""
    merged: list[tuple[int, int]] = []
    remaining = iter(items)
    item = next(remaining, None)
    for start, end in spans:
        while item is not None and item[1] <= start:
            item = next(remaining, None)
        if item is not None and item[0] <= start and merged and merged[-1][1] > item[0]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def definition_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every definition-list entry of `text`: its term through its definition."""
    return [(term[0], definition[1]) for term, definition in definition_pairs(text)]


def definition_pairs(text: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(term, definition) spans of `text`'s definition lists: a term's paragraph (`is_term`)
    and the paragraph of prose after it."""
    paragraphs = paragraph_spans(text)
    return [
        (term, definition)
        for term, definition in pairwise(paragraphs)
        if is_term(text[term[0] : term[1]]) and not is_term(text[definition[0] : definition[1]])
    ]


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every paragraph of `text` (blank lines between), trimmed."""
    spans, begin = [], 0
    for blank in [*_BLANK_LINE.finditer(text), None]:
        end = blank.start() if blank else len(text)
        span = _trimmed(text, begin, end)
        if span[0] < span[1]:
            spans.append(span)
        begin = blank.end() if blank else end
    return spans


def is_term(paragraph: str) -> bool:
    """A definition list's term: a short paragraph that does not end as a sentence does
    ("disable", "-l\n--list", "--format=<fmt>"); a longer one is prose, and a Markdown
    heading ("# Results") heads a section, not an entry."""
    paragraph = paragraph.strip()
    return (
        0 < len(paragraph) <= TERM_MAX_CHARS
        and paragraph[-1] not in TERM_ENDS
        and not paragraph.startswith("#")
    )


def _join_short(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sentences with each one below the minimum joined to a neighbour: to the next when it
    introduces it (the first piece, or a label: a heading, an option or a term without a
    terminator), else to the previous one (a short sentence, an abbreviation's tail)."""
    joined: list[tuple[int, int]] = []
    lead_in: int | None = None  # start of pieces waiting for the piece they introduce
    for start, end in spans:
        start, lead_in = (start if lead_in is None else lead_in), None
        if _is_label(text, (start, end)):
            lead_in = start
        elif not _is_short(text, (start, end)):
            joined.append((start, end))
        elif not joined or not ends_sentence(text[start:end]):
            lead_in = start
        else:
            joined[-1] = (joined[-1][0], end)
    if lead_in is not None:  # nothing follows: it joins the piece before, or stands alone
        if joined:
            joined[-1] = (joined[-1][0], spans[-1][1])
        else:
            joined.append((lead_in, spans[-1][1]))
    return joined


def _is_label(text: str, span: tuple[int, int]) -> bool:
    """A line that names what follows ("pop [--index] [<stash>]" above its description in a
    manual): alone it is a strip no question's words match, and the description kept without
    it no longer says what it describes."""
    piece = text[span[0] : span[1]]
    return not ends_sentence(piece) and len(piece.split()) <= MAX_LABEL_WORDS


def _is_short(text: str, span: tuple[int, int]) -> bool:
    piece = text[span[0] : span[1]]
    return len(piece) < MIN_STRIP_CHARS or len(piece.split()) < MIN_STRIP_WORDS
