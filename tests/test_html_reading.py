"""HTML read as a person reads it, on pages shaped as the generators write them (DocBook,
Sphinx, texinfo) and an EPUB made by pandoc: navigation chrome never reaches the index,
pages of links are found by their titles but ranked after content, tables are read row by
row under their caption and column names and cited by row, code blocks stay whole."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from crag_edge.citations import locate, locator
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.ingest import load_file
from crag_edge.ingest.formats.html import load_html, read_html
from crag_edge.ingest.outline import outline_places
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.types import NAVIGATION, Chunk

MAX_BYTES = 10_000_000
NAVHEADER = """<div class="navheader"><table width="100%" summary="Navigation header">
<tr><th colspan="3" align="center">{title}</th></tr><tr><td align="left">
<a accesskey="p" href="prev.html">Prev</a> </td><th width="60%" align="center">Chapter 8.
Data Types</th><td align="right"> <a accesskey="n" href="next.html">Next</a></td></tr></table>
<hr/></div>"""
NAVFOOTER = """<div class="navfooter"><hr/><table width="100%" summary="Navigation footer">
<tr><td align="left"><a accesskey="p" href="prev.html">Prev</a> </td><td align="center">
<a accesskey="u" href="datatype.html">Up</a></td><td align="right"> <a accesskey="n"
href="next.html">Next</a></td></tr><tr><td align="left" valign="top">8.5. Binary Data Types
</td><td align="center"><a accesskey="h" href="index.html">Home</a></td><td align="right"
valign="top"> 8.7. Enumerated Types</td></tr></table></div>"""
CHROME_WORDS = ("Prev", "Next", "Home", "Up", "Navigation", "Enumerated", "Binary Data")

NUMERIC_ROWS = [
    ("smallint", "2 bytes", "small-range integer", "-32768 to +32767"),
    ("integer", "4 bytes", "typical choice for integer", "-2147483648 to +2147483647"),
    ("bigint", "8 bytes", "large-range integer", "-9223372036854775808 to +9223372036854775807"),
    ("decimal", "variable", "user-specified precision, exact", "up to 131072 digits"),
    ("real", "4 bytes", "variable-precision, inexact", "6 decimal digits precision"),
    ("double precision", "8 bytes", "variable-precision, inexact", "15 decimal digits"),
    ("serial", "4 bytes", "autoincrementing integer", "1 to 2147483647"),
    ("bigserial", "8 bytes", "large autoincrementing integer", "1 to 9223372036854775807"),
]


def docbook_page(title: str, body: str) -> str:
    """A page as DocBook's XSL writes the PostgreSQL manual: navigation bars around it."""
    return (
        f'<html><head><title>{title}</title><meta name="generator" content="DocBook XSL"/>'
        f'</head><body>{NAVHEADER.format(title=title)}<div class="sect1"><div class="titlepage">'
        f'<div><div><h2 class="title">{title}</h2></div></div></div>{body}</div>'
        f"{NAVFOOTER}</body></html>"
    )


def numeric_types_page() -> str:
    rows = "".join(
        "<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in NUMERIC_ROWS
    )
    table = (
        '<div class="table"><p class="title"><strong>Table 8.2. Numeric Types</strong></p>'
        '<div class="table-contents"><table class="table" summary="Numeric Types" border="1">'
        "<thead><tr><th>Name</th><th>Storage Size</th><th>Description</th><th>Range</th></tr>"
        f"</thead><tbody>{rows}</tbody></table></div></div>"
    )
    prose = [
        "Numeric types consist of two-, four-, and eight-byte integers, four- and eight-byte "
        "floating-point numbers, and selectable-precision decimals. Table 8.2 lists them.",
        "The syntax of constants for the numeric types is described in Section 4.1.2.",
        "The types smallint, integer, and bigint store whole numbers, that is, numbers "
        "without fractional components, of various ranges. Attempts to store values outside "
        "of the allowed range will result in an error.",
        "The type integer is the common choice, as it offers the best balance between range, "
        "storage size, and performance. The smallint type is generally only used if disk "
        "space is at a premium. The bigint type is designed to be used when the range of the "
        "integer type is insufficient.",
    ]
    body = f"<p>{prose[0]}</p>{table}<p>{prose[1]}</p>"
    body += '<div class="sect2"><h3 class="title">8.1.1. Integer Types</h3>'
    body += "".join(f"<p>{p}</p>" for p in prose[2:]) + "</div>"
    return docbook_page("8.1. Numeric Types", body)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def html_document(path: Path, text: str) -> tuple[str, dict[str, object]]:
    doc = load_html(write(path, text), path.read_bytes())
    return doc.text, doc.metadata


def test_docbook_navigation_bars_and_table_of_contents_are_left_out(tmp_path: Path) -> None:
    toc = (
        '<div class="toc"><p><strong>Table of Contents</strong></p><dl class="toc"><dt>'
        '<a href="#a">8.1.1. Integer Types</a></dt><dt><a href="#b">8.1.2. Arbitrary '
        "Precision Numbers</a></dt></dl></div>"
    )
    page = docbook_page("8. Data Types", toc + "<p>PostgreSQL has a rich set of data types.</p>")
    text, metadata = html_document(tmp_path / "datatype.html", page)
    assert text == "8. Data Types\n\nPostgreSQL has a rich set of data types."
    assert metadata == {}


def test_a_table_of_contents_page_is_navigation_found_by_its_title(tmp_path: Path) -> None:
    entries = "".join(
        f'<li><a href="ch{n}.html">Chapter {n}. Topic number {n}</a></li>' for n in range(1, 30)
    )
    page = f"<html><head><title>Debian Reference</title></head><body><ul>{entries}</ul></body>"
    text, metadata = html_document(tmp_path / "index.en.html", page)
    assert (text, metadata) == ("Debian Reference", {NAVIGATION: True})
    picker = "<title>Languages</title><p>" + " ".join(
        f'<a href="index.{code}.html">{name}</a>'
        for code, name in [("en", "English"), ("de", "Deutsch"), ("fr", "Français")]
    )
    assert html_document(tmp_path / "index.html", picker)[1] == {NAVIGATION: True}


def test_gtk_doc_navigation_bar_is_left_out(tmp_path: Path) -> None:
    """gtk-doc (the GnuTLS and libtasn1 API references) puts its Top | Description links
    and Home/Up/Prev/Next icons in a table of class `navigation`."""
    page = (
        '<title>Abstract key API</title><table class="navigation" id="top"><tr><td>'
        '<a href="#" class="shortcut">Top</a> | <a href="#desc" class="shortcut">Description'
        '</a></td><td><a accesskey="h" href="index.html"><img alt="Home"></a></td></tr></table>'
        '<div class="refentry"><h2>Description</h2><p>An abstract key API.</p></div>'
    )
    text, metadata = html_document(tmp_path / "gnutls-abstract.html", page)
    assert (text, metadata) == ("Description\n\nAn abstract key API.", {})


def test_a_language_picker_with_notes_is_navigation_its_languages_content(
    tmp_path: Path,
) -> None:
    """A picker is told by its links to itself in a language, not by its share of link text:
    the Debian Reference's `index.html` is mostly notes about the files."""
    notes = (
        "<p>All files are encoded in <b>UTF-8</b>.</p><p>If your favorite language is not "
        "found in this list, please install the corresponding debian-reference package.</p>"
        "<p>Some browsers may not be set up to read compressed plain text. Use an appropriate "
        "file viewer to read them directly from the folder they are installed in.</p>"
    )
    picker = (
        "<title>Debian Reference (version 2)</title><h1>Debian Reference (version 2)</h1>"
        '<dl><dt><b>English</b></dt><dd><a href="index.en.html">HTML (multi files)</a>, '
        '<a href="debian-reference.en.pdf">PDF</a></dd></dl>' + notes
    )
    text, metadata = html_document(tmp_path / "index.html", picker)
    assert (text, metadata) == ("Debian Reference (version 2)", {NAVIGATION: True})
    for name, link in [("index.fr.html", "index.en.html"), ("guide.html", "index.en.html")]:
        page = f'<title>Guide</title><p><a href="{link}">English</a></p>{notes}'
        text, metadata = html_document(tmp_path / name, page)
        assert "encoded in UTF-8" in text and metadata == {}


def test_a_list_of_references_to_other_sites_is_content(tmp_path: Path) -> None:
    """Links that leave the site are a page's references (an acronym list's definitions)."""
    page = "<title>Acronyms</title><dl>" + "".join(
        f'<dt>{short}</dt><dd><a href="https://en.wikipedia.org/{short}">{long}</a></dd>'
        for short, long in [("ANSI", "American National Standards Institute"),
                            ("ACID", "Atomicity, Consistency, Isolation, Durability")]
    )  # fmt: skip
    text, metadata = html_document(tmp_path / "acronyms.html", page)
    assert "American National Standards Institute" in text and metadata == {}


def test_sphinx_chrome_is_left_out_its_footnotes_and_sidebars_kept(tmp_path: Path) -> None:
    page = """<html><head><title>Built-in Types</title></head><body>
    <div class="mobile-nav"><nav class="nav-content" role="navigation">Quick search</nav></div>
    <div class="related" role="navigation"><ul><li><a href="genindex.html">index</a></li>
    <li><a href="modules.html">modules</a> |</li><li>Python &#187;</li></ul></div>
    <div class="document"><div class="body" role="main"><section id="built-in-types">
    <h1>Built-in Types<a class="headerlink" href="#built-in-types">¶</a></h1>
    <p>The principal built-in types are numerics, sequences and mappings.<a
    class="footnote-reference" href="#id2">1</a></p><aside class="footnote brackets"
    id="id2"><p>Additional information on these special methods may be found in the
    Reference Manual.</p></aside><aside class="sidebar"><p>A box beside the text.</p></aside>
    </section></div>
    </div><div class="sphinxsidebar" role="navigation"><h3>Table of Contents</h3><ul><li>
    <a href="#">Built-in Types</a></li></ul><h3>This Page</h3></div>
    <div class="footer">&copy; Copyright 2001-2026, Python Software Foundation.</div>
    </body></html>"""
    path = write(tmp_path / "stdtypes.html", page)
    doc = load_html(path, path.read_bytes())
    assert doc.text == (
        "Built-in Types\n\nThe principal built-in types are numerics, sequences and mappings.1"
        "\n\nAdditional information on these special methods may be found in the Reference Manual."
        "\n\nA box beside the text."
    )
    assert [h.title for h in doc.outline.headings] == ["Built-in Types"]


def test_texinfo_header_skip_links_and_redirects(tmp_path: Path) -> None:
    page = """<body><a class="skip" href="#main">Skip to main content</a><div class="chapter">
    <div class="header"><p>Next: <a href="Output.html">Output Formats</a>, Previous:
    <a href="Overview.html">Overview</a> [<a href="index.html#SEC_Contents">Contents</a>]</p>
    </div><h2 class="chapter">1 What Comparison Means</h2><p>There are several ways to think
    about the differences between two files.</p><ul class="section-toc"><li><a href="#Hunks">
    Hunks</a></li></ul><header><p>site banner</p></header><article><header><h3>Hunks</h3>
    </header><p>A hunk is a group of differing lines.</p></article></div></body>"""
    text, _ = html_document(tmp_path / "Comparison.html", page)
    assert text == (
        "1 What Comparison Means\n\nThere are several ways to think about the differences "
        "between two files.\n\nHunks\n\nA hunk is a group of differing lines."
    )
    redirect = (
        '<head><title>Brief</title><meta http-equiv="Refresh" content="0; url=Comparison.html">'
        '</head><body><p>The node you are looking for is at <a href="Comparison.html">Brief</a>.'
    )
    assert html_document(tmp_path / "Brief.html", redirect) == ("Brief", {NAVIGATION: True})


def test_a_one_page_manual_is_content_its_index_left_out(tmp_path: Path) -> None:
    """makeinfo --no-split writes a whole manual as one page ending with its index; a page
    the index fills (DocBook's, Sphinx's genindex) is navigation."""
    index = """<table class="index-cp"><tr><td><a href="#keys">key sizes</a></td></tr>
    <tr><td><a href="#prio">priority strings</a></td></tr></table>"""
    manual = f"""<title>GnuTLS</title><h2>6.11 Selecting cryptographic key sizes</h2>
    <p>Many algorithms are involved in TLS.</p><h2>Concept Index</h2>{index}"""
    text, metadata = html_document(tmp_path / "gnutls.html", manual)
    assert text == (
        "6.11 Selecting cryptographic key sizes\n\nMany algorithms are involved in TLS."
        "\n\nConcept Index"
    )
    assert metadata == {}
    alone = f"<title>Index</title><h1>Index</h1>{index}"
    assert html_document(tmp_path / "genindex.html", alone) == ("Index", {NAVIGATION: True})


def test_texinfo_table_rows_after_a_head_without_a_body_are_records(tmp_path: Path) -> None:
    """makeinfo closes a `thead` and goes on with bare rows, no `tbody`."""
    page = """<h3>6.11 Selecting cryptographic key sizes</h3><div class="float"><table>
    <thead><tr><th>Security bits</th><th>RSA, DH and SRP parameter size</th></tr></thead>
    <tr><td>112</td><td>2048</td></tr><tr><td>128</td><td>3072</td></tr></table>
    <div class="float-caption"><p><strong>Table 6.7: </strong>Key sizes.</p></div></div>"""
    blocks = read_html(page).text.split("\n\n")
    assert blocks[1:4] == [
        "Security bits | RSA, DH and SRP parameter size",
        "6.11 Selecting cryptographic key sizes: Security bits: 112; RSA, DH and SRP "
        "parameter size: 2048",
        "6.11 Selecting cryptographic key sizes: Security bits: 128; RSA, DH and SRP "
        "parameter size: 3072",
    ]


def test_a_table_is_read_row_by_row_under_its_caption_and_column_names(tmp_path: Path) -> None:
    text, _ = html_document(tmp_path / "datatype-numeric.html", numeric_types_page())
    assert (
        "Table 8.2. Numeric Types: Name: bigint; Storage Size: 8 bytes; Description: "
        "large-range integer; Range: -9223372036854775808 to +9223372036854775807"
    ) in text.split("\n\n")
    assert not any(word in text for word in CHROME_WORDS)


def test_each_row_is_a_place_cited_by_its_table_and_number(tmp_path: Path) -> None:
    path = write(tmp_path / "datatype-numeric.html", numeric_types_page())
    doc = load_html(path, path.read_bytes())
    places = outline_places(doc.outline)
    start = doc.text.index("Name: bigint")
    where = locate(places, start, start + 20)
    chunk = Chunk(1, 1, 0, doc.text, 0, len(doc.text), str(path))
    assert locator(replace(chunk, pages=where.pages, section=where.section)) == (
        "datatype-numeric.html § Table 8.2. Numeric Types row 3"
    )
    after = doc.text.index("The syntax of constants")
    assert locate(places, after, after + 10) == replace(where, pages=None, section=(
        "8.1. Numeric Types"
    ))  # fmt: skip


def test_headers_spans_captions_and_nested_tables(tmp_path: Path) -> None:
    page = """<h2>Ports</h2><table><caption>Default ports</caption>
    <tr><th rowspan="2">Service</th><th colspan="2">Port</th></tr><tr><th>TCP</th><th>UDP</th></tr>
    <tr><td>DNS</td><td colspan="2">53</td></tr>
    <tr><td rowspan="2">NTP</td><td>-</td><td>123</td></tr><tr><td>—</td><td>
    <table><tr><td>inner</td><td>cell</td></tr></table></td></tr>
    <tr><td colspan="999999999">wide</td></tr></table>
    <table><tr><td>layout</td><td>table</td></tr><tr><td>kept</td><td>as lines</td></tr></table>
    <table><tr><th>Name</th><th>Storage Size</th></tr><tr><td>boolean</td><td>1 byte</td></tr>"""
    page_text = read_html(page).text
    blocks = page_text.split("\n\n")
    assert blocks[1:4] == ["Default ports", "Service | Port TCP | Port UDP",
                           "Default ports: Service: DNS; Port TCP: 53"]  # fmt: skip
    assert "Default ports: Service: NTP; Port TCP: -; Port UDP: 123" in blocks
    assert "Default ports: Service: NTP; Port TCP: —; Port UDP: inner cell" in blocks
    assert "Default ports: Service: wide" in blocks
    assert "layout table\nkept as lines" in blocks
    # An unclosed table without a caption is named by the heading in effect.
    assert blocks[-1] == "Ports: Name: boolean; Storage Size: 1 byte"


def test_code_blocks_stay_whole_and_list_items_apart(tmp_path: Path) -> None:
    page = """<p>Run:</p><pre>for f in *.txt; do
    wc -l "$f"
done</pre><ul><li>first item</li><li>second <b>item</b></li></ul>"""
    assert read_html(page).text == (
        'Run:\n\nfor f in *.txt; do\n    wc -l "$f"\ndone\n\nfirst item\nsecond item'
    )


def test_an_email_body_keeps_its_text_even_when_it_is_all_links() -> None:
    from email.message import EmailMessage

    from crag_edge.ingest.formats.mail import _parts

    message = EmailMessage()
    message.set_content('<p><a href="a.html">Agenda</a> <a href="b.html">Minutes</a></p>',
                        subtype="html")  # fmt: skip
    assert _parts(message)[0] == "Agenda Minutes"


@pytest.fixture
def settings() -> Settings:
    return Settings.load(chunk_tokens=96, chunk_overlap=16)


def test_the_bigint_row_is_found_and_cited_by_its_row(
    tmp_path: Path, embedder: OnnxEmbedder, settings: Settings
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "datatype-numeric.html", numeric_types_page())
    boolean = "<p>The boolean type can have several states.</p>"
    write(docs / "datatype-boolean.html", docbook_page("8.6. Boolean Type", boolean))
    with Engine.open(tmp_path / "kb.db", settings, create=True, embedder=embedder) as engine:
        engine.ingest([docs])
        hits = engine.search("How many bytes does a bigint take?", top_k=3)
    words = "Name: bigint; Storage Size: 8 bytes"
    found = [hit.chunk for hit in hits if words in hit.chunk.text]
    assert found, [hit.chunk.text[:80] for hit in hits]
    chunk = found[0]
    start = chunk.start + chunk.text.index(words)
    where = locate(chunk.places, start, start + len(words))
    assert locator(replace(chunk, pages=where.pages, section=where.section)) == (
        "datatype-numeric.html § Table 8.2. Numeric Types row 3"
    )
    assert not any(any(w in hit.chunk.text for w in CHROME_WORDS) for hit in hits)


def test_navigation_is_found_by_title_but_ranked_after_content(
    tmp_path: Path, embedder: OnnxEmbedder, settings: Settings
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    entries = "".join(f'<li><a href="c{n}.html">Harbour chapter {n}</a></li>' for n in range(9))
    write(docs / "contents.html", f"<title>Harbour Manual Contents</title><ul>{entries}</ul>")
    for n in range(3):
        write(docs / f"c{n}.html", f"<h1>Harbour chapter {n}</h1><p>Boats moor at pier {n}.</p>")
    with Engine.open(tmp_path / "kb.db", settings, create=True, embedder=embedder) as engine:
        engine.ingest([docs])
        hits = engine.search("Harbour Manual Contents", top_k=4)
    assert [Path(hit.chunk.source).name for hit in hits][-1] == "contents.html"
    assert hits[-1].chunk.metadata == {NAVIGATION: True} and hits[-1].rank == 4
    assert all(hit.chunk.metadata == {} for hit in hits[:3])


def test_an_epub_chapter_reads_without_its_navigation_and_cites_its_row(
    tmp_path: Path, embedder: OnnxEmbedder, settings: Settings
) -> None:
    """The PostgreSQL Boolean Type page made into an EPUB by pandoc, its navigation bars
    with it: the row is a headed record, and no chunk is the bars' "Prev Up Chapter 8"."""
    table = (
        '<div class="table"><p class="title"><strong>Table 8.19. Boolean Data Type</strong>'
        '</p><table class="table" border="1"><thead><tr><th>Name</th><th>Storage Size</th>'
        "<th>Description</th></tr></thead><tbody><tr><td><code>boolean</code></td><td>1 byte"
        "</td><td>state of true or false</td></tr></tbody></table></div>"
    )
    body = f"<p>PostgreSQL provides the standard SQL type boolean.</p>{table}"
    body += "<p>Boolean constants are the SQL key words TRUE, FALSE, and NULL.</p>"
    html = write(tmp_path / "boolean-type.html", docbook_page("8.6. Boolean Type", body))
    docs = tmp_path / "docs"
    docs.mkdir()
    epub = docs / "boolean-type.epub"
    subprocess.run(["pandoc", str(html), "-o", str(epub)], check=True, timeout=120)
    text = load_file(epub, epub.read_bytes(), MAX_BYTES).text
    # pandoc writes DocBook's table title as a paragraph all in bold: it still titles the rows.
    row = "Name: boolean; Storage Size: 1 byte; Description: state of true or false"
    assert f"\nTable 8.19. Boolean Data Type: {row}\n" in text
    assert not any(word in text for word in CHROME_WORDS)
    with Engine.open(tmp_path / "kb.db", settings, create=True, embedder=embedder) as engine:
        engine.ingest([docs])
        [hit] = engine.search("How much storage does a boolean take?", top_k=1)
    chunk = hit.chunk
    start = chunk.start + chunk.text.index("Name: boolean")
    where = locate(chunk.places, start, start + 13)
    assert locator(replace(chunk, pages=where.pages, section=where.section)).endswith("row 1")


def test_a_paragraph_partly_bold_before_a_table_does_not_title_it() -> None:
    table = "<table><tr><th>Name</th><th>Size</th></tr><tr><td>point</td><td>16 bytes</td></tr>"
    page = f"<h2>Geometry</h2><p>Run <strong>this</strong>:</p>{table}</table>"
    assert read_html(page).text.split("\n\n")[-1] == "Geometry: Name: point; Size: 16 bytes"
    titled = f"<h2>Geometry</h2><p><strong>Table 1. Shapes</strong></p>{table}</table>"
    assert read_html(titled).text.split("\n\n")[-1] == (
        "Table 1. Shapes: Name: point; Size: 16 bytes"
    )


def test_hostile_tables_stay_bounded() -> None:
    """Tables nested past any readable depth are read as cells; spans over many rows and
    columns cannot make megabytes of records out of kilobytes of page."""
    nested = read_html("<table><tr><td>x" * 20_000).text
    assert nested.split() == ["x"] * 20_000
    spans = "<table><tr><th>Name</th><th>Value</th></tr>"
    spans += '<tr><td colspan="1000" rowspan="1000">v</td></tr>' * 300 + "</table>"
    assert len(read_html(spans).text) < 20 * len(spans)


def test_sqlite_menus_and_table_of_contents_are_left_out() -> None:
    page = """<div class=nosearch><div class="tagline desktoponly">Small. Fast. Reliable.</div>
    <div class="menu mainmenu"><ul><li><a href="index.html">Home</a></li></ul></div></div>
    <div class=nosearch><div class="fancy_title">CREATE TABLE</div><div class="fancy_toc">
    <a>Table Of Contents</a><div class="fancy-toc1"><a href="#syntax">1. Syntax</a></div>
    </div></div><h1 id="syntax"><span>1. </span>Syntax</h1><p>The CREATE TABLE command.</p>"""
    assert read_html(page).text == "CREATE TABLE\n\n1. Syntax\n\nThe CREATE TABLE command."
