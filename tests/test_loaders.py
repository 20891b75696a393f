"""Loaders on real files: every format, and the broken files users actually have."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pypdf
import pytest

from crag_edge.ingest import (
    LoadError,
    is_supported,
    iter_beir,
    load_file,
    load_html,
    load_markdown,
    load_pdf,
    load_text,
)
from crag_edge.ingest.loaders import LoadedDocument
from crag_edge.ingest.outline import MAX_TITLE_CHARS, Heading, outline_places
from tests.documents import make_pdf, pen_spaced_pdf


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def parts(path: Path) -> tuple[Path, bytes]:
    """What ingest hands a loader: the file's path (its name) and its bytes."""
    return path, path.read_bytes()


def test_text_is_decoded_and_newlines_normalised(tmp_path: Path) -> None:
    doc = load_text(
        *parts(write(tmp_path / "notes.txt", b"\xef\xbb\xbfCaf\xc3\xa9\r\nline two\rend"))
    )
    assert (doc.source, doc.title, doc.text) == (
        str(tmp_path / "notes.txt"),
        "notes",
        "Café\nline two\nend",
    )


def test_text_with_utf16_bom(tmp_path: Path) -> None:
    doc = load_text(*parts(write(tmp_path / "w.txt", "Grüße".encode("utf-16"))))
    assert doc.text == "Grüße"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_text_in_utf16_without_a_bom(tmp_path: Path, encoding: str) -> None:
    """Saved without a byte-order mark (some Windows tools do), UTF-16 is told by its NUL
    bytes, one in every other byte of Latin text."""
    text = "Grüße aus Köln.\nBees dance to find flowers."
    doc = load_text(*parts(write(tmp_path / "w.txt", text.encode(encoding))))
    assert doc.text == text


def test_non_utf8_text_is_a_load_error(tmp_path: Path) -> None:
    path = write(tmp_path / "latin.txt", "café au lait".encode("latin-1"))
    with pytest.raises(LoadError, match=r"not valid utf-8 \(byte 3.*convert the file to UTF-8"):
        load_text(*parts(path))


def test_binary_content_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="binary"):
        load_text(*parts(write(tmp_path / "blob.txt", b"abc\x00\x01\x02")))


def test_markdown_kept_verbatim_and_titled_by_first_heading(tmp_path: Path) -> None:
    text = "Intro line\n\n## Setup ##\n\n- step *one*\n\n# Later\n"
    doc = load_markdown(*parts(write(tmp_path / "guide.md", text)))
    assert (doc.title, doc.text) == ("Setup", text)
    assert load_markdown(*parts(write(tmp_path / "plain.md", "no heading"))).title == "plain"


def test_markdown_headings_nest_outside_code_and_front_matter(tmp_path: Path) -> None:
    text = (
        "---\nsummary: # not a heading\n---\n"
        "# Guide\n\nIntro.\n\n## Install ##\n\n```bash\n# a shell comment\n```\n\n"
        "### [Linux](linux.md) and `apt`\nSteps.\n\nWindows\n-------\nClick.\n\n# C#\nEnd.\n"
    )
    doc = load_markdown(*parts(write(tmp_path / "guide.md", text)))
    headings = doc.outline.headings
    assert [(h.level, h.title) for h in headings] == [
        (1, "Guide"),
        (2, "Install"),
        (3, "Linux and apt"),
        (2, "Windows"),
        (1, "C#"),
    ]
    assert [doc.text[h.offset : h.offset + 4] for h in headings] == [
        "# Gu",
        "## I",
        "### ",
        "Wind",
        "# C#",
    ]
    assert [p.section for p in outline_places(doc.outline)] == [
        "Guide",
        "Guide \u203a Install",
        "Guide \u203a Install \u203a Linux and apt",
        "Guide \u203a Windows",
        "C#",
    ]
    assert doc.title == "Guide"


def test_front_matter_is_not_text_and_its_title_names_the_page(tmp_path: Path) -> None:
    """A site generator's settings block is not the page's text: neither indexed nor shown as
    evidence; its `title:` names a page that has no heading of its own."""
    body = "Run the installer twice.\n\n## Options\n\nNone.\n"
    front = '---\ntitle: "Installing the *widget*"\nlayout: post\ntags: [setup]\n---\n'
    doc = load_markdown(*parts(write(tmp_path / "install.md", front + body)))
    assert (doc.title, doc.text) == ("Installing the *widget*", body)
    assert [(h.title, doc.text[h.offset : h.offset + 10]) for h in doc.outline.headings] == [
        ("Options", "## Options")
    ]
    only = load_markdown(*parts(write(tmp_path / "empty.md", "---\nlayout: post\n---\n")))
    assert (only.title, only.text) == ("empty", "")


def test_markdown_heading_lines_of_any_length_are_read_in_one_pass(tmp_path: Path) -> None:
    """A heading line of a megabyte (a long run of blanks, unclosed links) is read once,
    not retried from every blank or bracket: the loader returns, with the usual titles."""
    blanks, links = " \t" * 500_000, "[a](" * 250_000
    text = f"# Bees{blanks}dance ##\n## Ants{blanks}#\n### {links}\n"
    headings = load_markdown(*parts(write(tmp_path / "long.md", text))).outline.headings
    assert [(h.level, h.title[:12]) for h in headings] == [
        (1, "Bees dance"),
        (2, "Ants"),
        (3, "[a]([a]([a]("),
    ]


WORDS = " ".join(f"word{i}" for i in range(20_000))


@pytest.mark.parametrize(
    ("name", "content"),
    [
        pytest.param("setext.md", f"{WORDS}\n---\n\nBees dance.\n", id="markdown-setext"),
        pytest.param("atx.md", f"# {WORDS}\n\nBees dance.\n", id="markdown-atx"),
        pytest.param("title.html", f"<title>{WORDS}</title><p>Bees dance.</p>", id="html-title"),
        pytest.param("h1.html", f"<h1>{WORDS}</h1><p>Bees dance.</p>", id="html-h1"),
        pytest.param("info.pdf", make_pdf(["Bees dance."], title=WORDS), id="pdf-info"),
    ],
)
def test_a_title_is_a_label_of_bounded_length(
    tmp_path: Path, name: str, content: str | bytes
) -> None:
    """A paragraph taken for a heading (a long line above `---`) or a huge <title> is cut
    to a label: a title is embedded with every chunk of its document and a heading stored
    with every chunk of its section, so a long one would be copied thousands of times."""
    path = write(tmp_path / name, content)
    doc = load_file(*parts(path), 10_000_000)
    titles = [doc.title] + [h.title for h in doc.outline.headings]
    assert all(t.startswith("word0 word1 ") and t.endswith("\u2026") for t in titles), titles
    assert max(map(len, titles)) <= MAX_TITLE_CHARS + 1
    assert "Bees dance." in doc.text


def test_a_beir_title_is_a_label_of_bounded_length(tmp_path: Path) -> None:
    path = write(tmp_path / "corpus.jsonl", json.dumps({"_id": "1", "title": WORDS, "text": "x"}))
    with path.open("rb") as fh:
        (doc,) = iter_beir(path, fh)
    assert isinstance(doc, LoadedDocument) and len(doc.title) <= MAX_TITLE_CHARS + 1


def test_html_headings_are_found_in_the_extracted_text(tmp_path: Path) -> None:
    html = """<html><head><title>PostgreSQL: CREATE INDEX</title></head><body>
    <div class="nav"><a href="/">Home</a></div><h1>CREATE INDEX</h1><p>define a new index</p>
    <h2>Parameters</h2><p>Options.</p><h3>Index Storage <code>Parameters</code></h3>
    <p>The fillfactor is a percentage.</p><h2>Notes</h2><p>See also.</p><h4>Unclosed"""
    doc = load_html(*parts(write(tmp_path / "sql-createindex.html", html)))
    assert doc.title == "PostgreSQL: CREATE INDEX"
    assert doc.outline.headings == tuple(
        Heading(doc.text.index(title), level, title)
        for level, title in [
            (1, "CREATE INDEX"),
            (2, "Parameters"),
            (3, "Index Storage Parameters"),
            (2, "Notes"),
        ]
    )
    places = outline_places(doc.outline)
    fillfactor = doc.text.index("The fillfactor")
    in_effect = [p for p in places if p.offset <= fillfactor][-1]
    assert in_effect.section == ("CREATE INDEX \u203a Parameters \u203a Index Storage Parameters")


def test_html_keeps_visible_text_and_structure(tmp_path: Path) -> None:
    html = """<!DOCTYPE html><html><head><title> The   Page </title>
    <style>p { color: red }</style><script>var s = "<p>hidden</p>";</script></head>
    <body><h1>Heading</h1><p>First &amp; <b>bold</b>
    paragraph.</p><div>line<br>break</div><ul><li>one</li><li>two</li></ul>
    <table><tr><td>a</td><td>b</td></tr></table><noscript>enable js</noscript></body></html>"""
    doc = load_html(*parts(write(tmp_path / "page.html", html)))
    assert doc.title == "The Page"
    assert doc.text == "Heading\n\nFirst & bold paragraph.\n\nline\nbreak\n\none\ntwo\n\na b"


def test_malformed_html_still_yields_its_text(tmp_path: Path) -> None:
    html = "<p>unclosed <b>bold <div>stray</span></div> 1 < 2 &amp; <h1>Title<p>after"
    doc = load_html(*parts(write(tmp_path / "broken.htm", html)))
    assert doc.text == "unclosed bold\nstray\n1 < 2 &\n\nTitle\n\nafter"
    assert doc.title == "broken"  # the <h1> never closes, so there is no reliable title
    doc = load_html(*parts(write(tmp_path / "unclosed.html", "<p>kept</p><script>lost forever")))
    assert doc.text == "kept"
    # The stdlib parser raises AssertionError on unknown marked sections such as these.
    doc = load_html(*parts(write(tmp_path / "ie.html", "<p>a<![if !IE]>b<![endif]>c<![ junk d")))
    assert doc.text == "abc<![ junk d"


def test_html_declared_charset_is_honoured(tmp_path: Path) -> None:
    body = '<meta charset="iso-8859-1"><p>café</p>'.encode("latin-1")
    assert load_html(*parts(write(tmp_path / "latin.html", body))).text == "café"
    with pytest.raises(LoadError, match="not valid utf-8"):
        load_html(*parts(write(tmp_path / "undeclared.html", "<p>café</p>".encode("latin-1"))))
    bogus = '<meta charset="no-such-codec"><p>café</p>'.encode("latin-1")
    with pytest.raises(LoadError, match="unknown"):
        load_html(*parts(write(tmp_path / "bogus.html", bogus)))


def test_pdf_pages_and_offsets(tmp_path: Path) -> None:
    path = write(
        tmp_path / "paper.pdf", make_pdf(["Page one text.", "Second page here."], "A Paper")
    )
    doc = load_pdf(*parts(path))
    assert doc.title == "A Paper"
    assert doc.metadata == {"page_count": 2}
    assert doc.outline.page_starts == (0, 16)
    assert doc.text == "Page one text.\n\nSecond page here."
    assert doc.text[16:].startswith("Second page")
    assert load_pdf(*parts(write(tmp_path / "untitled.pdf", make_pdf(["x"])))).title == "untitled"


def test_pdf_words_set_apart_by_moving_the_pen_are_words(tmp_path: Path) -> None:
    """A PDF typeset by LaTeX leaves a gap between words but draws no space character, and
    its font's code 0x20 is no space: the words are still read apart."""
    lines = ["9.8.11 Searching all hardlinks", "Invisible disk space consumption"]
    doc = load_pdf(*parts(write(tmp_path / "manual.pdf", pen_spaced_pdf(lines))))
    assert doc.text == "\n".join(lines)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"this is not a pdf at all", id="not-a-pdf"),
        pytest.param(make_pdf(["Some text."])[:150], id="truncated"),
        pytest.param(b"%PDF-1.4\n1 0 obj << /Type /Catalog", id="garbage-after-header"),
    ],
)
def test_broken_pdf_is_a_load_error(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(LoadError, match="unreadable PDF"):
        load_pdf(*parts(write(tmp_path / "broken.pdf", data)))


def test_encrypted_pdf_needs_a_password(tmp_path: Path) -> None:
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(make_pdf(["secret"])))
    writer.encrypt("password", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(LoadError, match="password"):
        load_pdf(*parts(write(tmp_path / "locked.pdf", buffer.getvalue())))


def test_beir_lines_load_and_bad_lines_are_reported(tmp_path: Path) -> None:
    lines = [
        '{"_id": "d1", "title": "First", "text": "Alpha text."}',
        "",
        '{"_id": 2, "text": "No title.", "metadata": {"year": 2020}}',
        "{not json",
        '["a", "list"]',
        '{"title": "no id", "text": "x"}',
        '{"_id": "d5", "text": 5}',
        '{"_id": "d6", "title": null, "text": "Null title."}',
        '{"_id": "d7", "title": "Lone \\ud800", "text": "surrogate \\udc00 escapes"}',
    ]
    path = write(tmp_path / "corpus.jsonl", "\n".join(lines) + "\n")
    with path.open("rb") as fh:
        items = list(iter_beir(path, fh))
    docs = [i for i in items if not isinstance(i, LoadError)]
    errors = [i for i in items if isinstance(i, LoadError)]
    assert [(d.source, d.title, d.text) for d in docs] == [
        ("beir:d1", "First", "Alpha text."),
        ("beir:2", "", "No title."),
        ("beir:d6", "", "Null title."),
        ("beir:d7", "Lone \ufffd", "surrogate \ufffd escapes"),  # storable UTF-8
    ]
    assert docs[1].metadata == {"year": 2020}
    assert [e.source for e in errors] == [f"{path}:{n}" for n in (4, 5, 6, 7)]
    assert "invalid JSON" in errors[0].reason
    assert "_id" in errors[2].reason


def test_supported_by_suffix_in_any_case() -> None:
    supported = ["A.TXT", "b.markdown", "c.htm", "d.pdf", "e.Docx", "f.epub", "g.mbox"]
    assert all(is_supported(Path(name)) for name in supported)
    assert not any(is_supported(Path(name)) for name in ["e.png", "Makefile", "old.doc"])
