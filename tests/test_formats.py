"""Every document format on files made by the real tools (tests/data/formats/make.sh): text
fidelity, structure for citations, and the hostile files users and attackers send."""

from __future__ import annotations

import io
import mailbox
import shutil
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest

from crag_edge.citations import locate, locator
from crag_edge.ingest import LoadError, load_file
from crag_edge.ingest.formats.archive import EXPANSION, MAX_MEMBERS
from crag_edge.ingest.formats.numbers import shown
from crag_edge.ingest.loaders import LoadedDocument, pdf_pages
from crag_edge.ingest.outline import outline_places
from crag_edge.types import Chunk
from tests.documents import drawn_pdf, make_pdf

FIXTURES = Path(__file__).parent / "data" / "formats"
MAX_BYTES = 10_000_000
OCR = shutil.which("tesseract") is not None


def load(name: str, max_bytes: int = MAX_BYTES) -> LoadedDocument:
    path = FIXTURES / name
    return load_file(path, path.read_bytes(), max_bytes)


def cite(doc: LoadedDocument, phrase: str) -> str:
    """The locator of the span of `doc` holding `phrase`, as a chunk of it would be cited."""
    start = doc.text.index(phrase)
    where = locate(outline_places(doc.outline), start, start + len(phrase))
    chunk = Chunk(0, 0, 0, phrase, start, start + len(phrase), doc.source)
    return locator(Chunk(**{**chunk.__dict__, "pages": where.pages, "section": where.section}))


def test_docx_headings_lists_tables_footnotes_and_accepted_changes() -> None:
    doc = load("handbook.docx")
    assert doc.title == "Harbour Handbook"
    assert "- Check the tide table before mooring" in doc.text
    assert "Berth: B7; Length: 18 m; Depth: 4.4 m" in doc.text  # a row names its columns
    assert "\n\nBerth: B7;" in doc.text  # the prose before the table is too long for a caption
    assert "Fuel for it is kept in the locked shed" in doc.text  # a tracked insertion
    assert "runs on petrol" not in doc.text  # a tracked deletion
    assert "Power posts supply 16 amp shore power." in doc.text  # the footnote
    assert cite(doc, "tested every second Tuesday") == "handbook.docx § Power"


def test_docx_text_box_written_twice_for_old_readers_is_read_once(tmp_path: Path) -> None:
    """Word writes a text box as `mc:AlternateContent`: a Choice and a Fallback copy."""
    document = zipfile.ZipFile(FIXTURES / "handbook.docx").read("word/document.xml")
    box = (
        b'<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-'
        b'compatibility/2006"><mc:Choice Requires="wps"><w:r><w:t>Boxed note.</w:t></w:r>'
        b"</mc:Choice><mc:Fallback><w:r><w:t>Boxed note.</w:t></w:r></mc:Fallback>"
        b"</mc:AlternateContent>"
    )
    end = document.index(b"</w:p>")
    raw = with_member("handbook.docx", "word/document.xml", document[:end] + box + document[end:])
    path = tmp_path / "boxed.docx"
    assert load_file(path, raw, MAX_BYTES).text.count("Boxed note.") == 1


def test_odt_as_libreoffice_wrote_it_keeps_the_same_text() -> None:
    doc = load("handbook.odt")
    assert "Fuel for it is kept in the locked shed" in doc.text
    assert "runs on petrol" not in doc.text  # kept apart in text:tracked-changes
    assert "Berth: A1; Length: 12 m; Depth: 3.1 m" in doc.text
    assert "[1] Power posts supply 16 amp shore power." in doc.text
    assert cite(doc, "tested every second Tuesday") == "handbook.odt § Power"


@pytest.mark.parametrize("name", ["deck.pptx", "deck.odp"])
def test_slides_with_titles_tables_and_speaker_notes(name: str) -> None:
    doc = load(name)
    assert doc.metadata["slide_count"] == 4
    notes = "code signing certificate expired in March"
    assert f"Speaker notes: The offline installer slipped because the {notes}" in doc.text
    assert cite(doc, notes) == f"{name} slide 2 § Roadmap"
    assert cite(doc, "Item: Servers; Cost: 1200") == f"{name} slide 3 § Costs"
    assert "<number>" not in doc.text  # a notes page's slide-number field is no text


@pytest.mark.parametrize(
    ("name", "row", "where"),
    [
        (
            "suppliers.xlsx",
            "Item: Anchor chain; Supplier: Baltic Steel; Lead time: 3 weeks; Unit price: 95; "
            "Next delivery: 2026-03-30",  # a date cell reads as a date, not a day number
            3,
        ),
        ("crew.ods", "Name: Tom Reyes; Role: Engineer; Watch: Night", 3),
        ("crew.csv", "Name: Lena Park; Role: Deckhand; Watch: Afternoon", 4),
    ],
)
def test_sheet_rows_read_as_records_cited_by_row(name: str, row: str, where: int) -> None:
    doc = load(name)
    assert row in doc.text
    sheet = "" if name.endswith(".csv") else f" § {Path(name).stem}"
    assert cite(doc, row) == f"{name} row {where}{sheet}"


@pytest.mark.parametrize("name", ["values.xlsx", "values.ods"])
def test_sheet_cells_read_as_their_number_format_shows_them(name: str) -> None:
    """LibreOffice saved one sheet as both: a date as month/day/year, a time, a percentage
    and a currency amount, each stored as a plain number (a day count, a fraction of a day)."""
    doc = load(name)
    row = (
        "Customer: Harbour Cafe; Ordered on: 2026-03-01; Pickup time: 14:30; Discount: 12.5%; "
        "Total: $1,234.50"
    )
    assert row in doc.text
    assert "Discount: 5.0%; Total: $89.00" in doc.text
    assert cite(doc, row) == f"{name} row 2 § Orders"


@pytest.mark.parametrize(
    ("value", "code", "text"),
    [
        (46082, "mm/dd/yyyy", "2026-03-01"),  # any order of day and month reads as ISO
        (46082.75, "m/d/yy h:mm", "2026-03-01 18:00"),
        (0.6041666666666666, "hh:mm:ss", "14:30:00"),
        (0.125, "0.0%", "12.5%"),
        (1234.5, "[$$-409]#,##0.00", "$1,234.50"),
        (-1234.5, '"$"#,##0.00_);[Red]("$"#,##0.00)', "-$1,234.50"),  # the sign, not brackets
        (1234.5, "#,##0.00 [$\u20ac-407]", "1,234.50 \u20ac"),
        (2.5, "0", "3"),  # half away from zero, as a spreadsheet rounds
        (12, '0 "kg"', "12 kg"),
        (1.5, "[h]:mm", None),  # elapsed hours: no time of day shows them
        (1234.5, "General", None),
        (0.25, "# ?/?", None),
        (1e6, "0.00E+00", None),
    ],
)
def test_number_formats_show_values_as_a_spreadsheet_does(
    value: float, code: str, text: str | None
) -> None:
    assert shown(value, code) == text


def test_epub_chapters_in_reading_order_with_their_headings() -> None:
    doc = load("book.epub")
    assert doc.title == "Small Boat Seamanship"
    assert doc.text.index("bowline") < doc.text.index("Barometric") < doc.text.index("In fog")
    assert cite(doc, "one prolonged blast") == "book.epub § Fog"
    start = doc.text.index("one prolonged blast")
    assert locate(outline_places(doc.outline), start, start + 5).section == "Weather \u203a Fog"


def test_rtf_text() -> None:
    doc = load("handbook.rtf")
    assert "emergency generator runs on biodiesel" in doc.text
    assert "{\\" not in doc.text


def mail(
    subject: str, body: str, day: int, attachment: tuple[str, bytes] | None = None
) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "Ana <ana@example.org>"
    message["To"] = "ops@example.org"
    message["Subject"] = subject
    message["Date"] = f"Mon, {day:02d} Mar 2026 09:30:00 +0000"
    message.set_content(body)
    if attachment:
        name, data = attachment
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message


def write_mbox(path: Path, messages: list[EmailMessage]) -> Path:
    box = mailbox.mbox(path)
    try:
        for message in messages:
            box.add(message)
        box.flush()
    finally:
        box.close()
    return path


def test_mbox_messages_are_sections_named_by_subject_and_day(tmp_path: Path) -> None:
    path = write_mbox(
        tmp_path / "thread.mbox",
        [
            mail("migration plan", "We move the database next month.", 1),
            mail("Re: migration plan", "The rollback window is two hours.\nFrom now on, ask.", 2),
        ],
    )
    doc = load_file(path, path.read_bytes(), MAX_BYTES)
    assert doc.metadata["message_count"] == 2
    assert "From now on, ask." in doc.text  # a body line starting "From " is no separator
    assert cite(doc, "rollback window") == "thread.mbox § Re: migration plan (2026-03-02)"
    assert "Subject: Re: migration plan" in doc.text


def test_eml_attachments_are_documents_of_their_own_read_by_their_type(tmp_path: Path) -> None:
    docx = (FIXTURES / "handbook.docx").read_bytes()
    message = mail("Harbour rules", "See the attached handbook.", 3, ("handbook.docx", docx))
    message.add_attachment(b"\x89PNG\r\n", maintype="image", subtype="png", filename="x.png")
    path = tmp_path / "rules.eml"
    path.write_bytes(bytes(message))
    doc = load_file(path, path.read_bytes(), MAX_BYTES)
    assert doc.title == "Harbour rules"
    assert doc.metadata["from"] == "Ana <ana@example.org>"
    assert "See the attached handbook." in doc.text
    assert "Attachments: handbook.docx, x.png" in doc.text
    assert "biodiesel" not in doc.text and "PNG" not in doc.text
    [handbook] = doc.attached  # the image is of no type that is read
    assert isinstance(handbook, LoadedDocument)
    assert handbook.source == f"{path} \u203a Harbour rules (2026-03-03) \u203a handbook.docx"
    assert handbook.title == "Harbour Handbook"  # read as a .docx, titled as one
    assert handbook.metadata["subject"] == "Harbour rules"
    assert cite(handbook, "tested every second Tuesday") == (
        "rules.eml \u203a Harbour rules (2026-03-03) \u203a handbook.docx § Power"
    )


@pytest.mark.skipif(not OCR, reason="Tesseract is not installed (apt-get install tesseract-ocr)")
def test_scanned_pdf_pages_are_read_by_ocr_and_cited_as_such() -> None:
    doc = load("scan.pdf")
    assert doc.metadata == {"page_count": 2, "ocr_pages": 2}
    assert "replaced after four thousand hours" in doc.text
    assert cite(doc, "four thousand hours") == "scan.pdf p. 2 (OCR)"


def test_scanned_pdf_without_ocr_says_how_to_read_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")  # no tesseract to be found
    doc = load("scan.pdf")
    assert doc.text == ""
    [warning] = doc.warnings
    assert warning.startswith("2 of 2 pages have no text layer") and "tesseract-ocr" in warning


def test_pdf_table_rows_keep_their_column_names() -> None:
    doc = load("tables.pdf")
    row = "Service: Crane lift; Default: 2 tonnes; Limit: 5 tonnes"
    caption = "The following table lists the limits of each harbour service."  # the line above
    assert f"\n{caption} \u2014 {row}\n" in doc.text
    assert cite(doc, row) == "tables.pdf p. 2"  # LibreOffice's export leaves page 1 blank


@pytest.mark.parametrize(
    ("name", "row", "number", "section"),
    [
        (
            "numeric-types.docx",
            "Numeric Types \u2014 Name: bigint; Storage Size: 8 bytes; Description: large-range "
            "integer; Range: -9223372036854775808 to +9223372036854775807",
            3,
            "8.1. Numeric Types",
        ),
        (
            "boolean-type.docx",
            "Table 8.19. Boolean Data Type \u2014 Name: boolean; Storage Size: 1 byte; "
            "Description: state of true or false",
            1,
            "8.6. Boolean Type",
        ),
        (
            "money-type.odt",
            "Table 8.3. Monetary Types \u2014 Name: money; Storage Size: 8 bytes; Description: "
            "currency amount; Range: -92233720368547758.08 to +92233720368547758.07",
            1,
            "8.2. Monetary Types",
        ),
    ],
)
def test_document_table_rows_read_alone_with_caption_and_columns_cited_by_row(
    name: str, row: str, number: int, section: str
) -> None:
    doc = load(name)
    assert f"\n{row}\n" in doc.text  # a block of its own
    assert cite(doc, row) == f"{name} row {number} § {section}"
    after = doc.text.rsplit("\n\n", 1)[-1]  # the paragraph after the table is on no row
    assert cite(doc, after) == f"{name} § {section}"


def test_a_manual_printed_by_libreoffice_reads_without_its_running_heads() -> None:
    """Four pages under the head `Harbour Operations Manual · Moorings` and over the foot
    `Page N of 4`; words with soft hyphens broken where LibreOffice's lines end."""
    raw, _ = pdf_pages("manual.pdf", (FIXTURES / "manual.pdf").read_bytes())
    printed = "\n".join(raw)
    assert printed.count("Operations Manual") == 4 and "Page 3 of 4" in printed
    assert "infor-\nmation" in printed and "moor-\nings" in printed
    doc = load("manual.pdf")
    assert "Operations Manual" not in doc.text and "of 4" not in doc.text
    assert "-\n" not in doc.text  # every broken word joined
    words = " ".join(doc.text.split())  # line breaks between words aside
    assert words.count("information about moorings and well-known pontoon rules") == 12
    assert cite(doc, "mooring fee of twelve euros") == "manual.pdf p. 2"


def manual_page(number: int, lines: list[str]) -> str:
    """A page of a printed manual: its running head, its lines, its page number."""
    return "\n".join(["Harbour Operations Manual \u00b7 Moorings", *lines, f"Page {number} of 5"])


def test_pdf_running_heads_and_page_numbers_are_dropped_and_broken_words_joined(
    tmp_path: Path,
) -> None:
    body = [
        [f"Berth {letter} takes boats up to {metres} metres.", "Check the tide table first.",
         f"The {letter} pontoon has {metres // 2} cleats.", f"Its water tap is number {metres}."]
        for letter, metres in zip("ABCD", (12, 14, 16, 18), strict=True)
    ]  # fmt: skip
    broken = ["The harbour office keeps infor-", "mation on every berth, a well-", "known list;",
              "ask Jean-", "Paul for the key. A well-known rule applies."]  # fmt: skip
    pages = [manual_page(n, lines) for n, lines in enumerate([*body[:2], broken, *body[2:]], 1)]
    path = tmp_path / "manual.pdf"
    doc = load_file(path, make_pdf(pages), MAX_BYTES)
    assert "Operations Manual" not in doc.text and "of 5" not in doc.text
    assert doc.text.count("Check the tide table first.") == 4  # repeated, but not at the edge
    assert "keeps information on every berth, a well-known list;" in doc.text
    assert "ask Jean-\nPaul for the key" in doc.text  # a capital goes on: a name, not a break
    assert cite(doc, "information on every berth") == "manual.pdf p. 3"
    assert cite(doc, "Berth C takes boats") == "manual.pdf p. 4"
    two = load_file(path, make_pdf(pages[:2]), MAX_BYTES)  # too few pages to tell
    assert two.text.count("Operations Manual") == 2
    lines = ["Tide tables.", "Mooring fees.", "Fuel dock."]  # each page's one line, each once
    assert load_file(path, make_pdf(lines), MAX_BYTES).text == "\n\n".join(lines)


def printed_page(number: int, tight: str, rows: list[tuple[str, str]]) -> str:
    """A page as LaTeX prints a manual: a running head numbered in Roman, a line set
    tight (words 2.4 points apart, closer than pdfplumber's default 3), a ruled table of
    `rows` under a header row (when any), a running foot."""
    words = " -200 ".join(f"({word})" for word in tight.split())
    drawn = [
        f"BT /F1 12 Tf 72 760 Td (Harbour Manual {'i' * number if number < 4 else 'iv'}) Tj ET",
        f"BT /F1 12 Tf 72 700 Td [{words}] TJ ET",
        f"BT /F1 12 Tf 72 40 Td (Harbour Manual {number} / 4) Tj ET",
    ]
    for index, (left, right) in enumerate([("Berth", "Depth"), *rows] if rows else []):
        y = 600 - 24 * index
        drawn += [f"72 {y} 150 24 re S 222 {y} 150 24 re S",
                  f"BT /F1 12 Tf 78 {y + 7} Td ({left}) Tj ET",
                  f"BT /F1 12 Tf 228 {y + 7} Td ({right}) Tj ET"]  # fmt: skip
    return "\n".join(drawn)


def test_pdf_pages_with_tables_lose_their_running_lines_and_keep_words_apart() -> None:
    """A page holding a ruled table is read again by pdfplumber: its running foot, which
    stands before the rows there, is dropped too, and tightly set words stay words."""
    rows = [("North pier", "4 metres"), ("South pier", "6 metres"), ("Fuel dock", "3 metres")]
    pages = [
        printed_page(1, "Moorings are booked at the office.", []),
        printed_page(2, "Depths are measured at low water.", rows),
        printed_page(3, "Fees are paid on arrival.", []),
        printed_page(4, "Depths change after storms.", rows[:2]),
    ]
    doc = load_file(Path("printed.pdf"), drawn_pdf(pages), MAX_BYTES)
    assert "Harbour Manual" not in doc.text
    assert "Depths are measured at low water." in doc.text
    assert "Berth: North pier; Depth: 4 metres" in doc.text
    assert cite(doc, "Depths change after storms") == "printed.pdf p. 4"


# Hostile files: each is one LoadError naming what is wrong.


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def with_member(name: str, member: str, data: bytes) -> bytes:
    """The fixture `name` with one member replaced."""
    with zipfile.ZipFile(FIXTURES / name) as source:
        members = {n: source.read(n) for n in source.namelist()}
    return zipped(members | {member: data})


def refused(tmp_path: Path, name: str, raw: bytes, max_bytes: int = MAX_BYTES) -> str:
    path = tmp_path / name
    path.write_bytes(raw)
    with pytest.raises(LoadError) as caught:
        load_file(path, raw, max_bytes)
    assert caught.value.source == str(path)
    return caught.value.reason


@pytest.mark.parametrize(
    ("fixture", "member"),
    [
        ("handbook.docx", "word/document.xml"),
        ("suppliers.xlsx", "xl/worksheets/sheet1.xml"),
        ("book.epub", "EPUB/text/ch001.xhtml"),
    ],
)
def test_zip_bomb_is_refused_before_unpacking(tmp_path: Path, fixture: str, member: str) -> None:
    max_bytes = 100_000
    bomb = with_member(fixture, member, b" " * (EXPANSION * max_bytes + 1))
    assert len(bomb) < 50_000  # a few kB that unpack to 2 MB: 20 x max_bytes
    assert "refused (a zip bomb?)" in refused(tmp_path, fixture, bomb, max_bytes)


def test_a_container_of_too_many_files_is_refused(tmp_path: Path) -> None:
    many = {f"m{i}.xml": b"" for i in range(MAX_MEMBERS)}
    raw = zipped({**many, "word/document.xml": b"<x/>"})
    assert "files inside, over 10,000" in refused(tmp_path, "many.docx", raw)


@pytest.mark.parametrize(
    "xml",
    [
        b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        b"<w:document xmlns:w='http://schemas.openxmlformats.org/wordprocessingml/2006/main'>"
        b"<w:body><w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:body></w:document>",
        b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<w:document xmlns:w='http://schemas.openxmlformats.org/wordprocessingml/2006/main'>"
        b"<w:body><w:p><w:r><w:t>&x;</w:t></w:r></w:p></w:body></w:document>",
    ],
    ids=["billion-laughs", "external-entity"],
)
def test_xml_entities_are_refused_never_expanded(tmp_path: Path, xml: bytes) -> None:
    raw = with_member("handbook.docx", "word/document.xml", xml)
    assert "XML bomb or XXE" in refused(tmp_path, "evil.docx", raw)


def test_password_protected_office_file_is_named_as_such(tmp_path: Path) -> None:
    raw = (FIXTURES / "locked.docx").read_bytes()
    assert "password-protected" in refused(tmp_path, "locked.docx", raw)


@pytest.mark.parametrize(
    "name", ["handbook.docx", "deck.pptx", "suppliers.xlsx", "book.epub", "crew.ods", "scan.pdf"]
)
def test_truncated_files_are_errors(tmp_path: Path, name: str) -> None:
    raw = (FIXTURES / name).read_bytes()
    reason = refused(tmp_path, name, raw[: len(raw) // 2])
    assert "damaged or truncated" in reason or "unreadable" in reason, reason


@pytest.mark.parametrize(
    ("fixture", "named", "says"),
    [
        ("scan.pdf", "report.docx", "its content is a PDF, not what .docx says; rename it to .pdf"),
        ("handbook.docx", "notes.txt", "a Word document (.docx), not what .txt says"),
        ("deck.pptx", "deck.xlsx", "a PowerPoint deck (.pptx), not what .xlsx says"),
        ("book.epub", "book.odt", "an EPUB book (.epub), not what .odt says"),
    ],
)
def test_a_file_whose_extension_lies_is_told_what_it_holds(
    tmp_path: Path, fixture: str, named: str, says: str
) -> None:
    assert says in refused(tmp_path, named, (FIXTURES / fixture).read_bytes())


def test_text_that_mentions_a_file_signature_is_still_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# PDF internals\n\nEvery PDF starts with %PDF-1.7 and a binary comment.\n")
    assert "starts with %PDF-1.7" in load_file(path, path.read_bytes(), MAX_BYTES).text


def test_a_sheet_of_a_million_rows_stops_at_the_text_budget(tmp_path: Path) -> None:
    """Long column names make each record long, so the budget is reached in a few thousand
    rows: what matters is that reading stops there, not how long a million rows take."""
    names = "".join(f'<c r="{c}1" t="inlineStr"><is><t>{c * 1000}</t></is></c>' for c in "AB")
    rows = f'<row r="1">{names}</row>' + "".join(
        f'<row r="{n}"><c r="A{n}"><v>{n}</v></c><c r="B{n}"><v>{n * 7}</v></c></row>'
        for n in range(2, 1_000_001)
    )
    sheet = (
        '<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/'
        f'spreadsheetml/2006/main"><sheetData>{rows}</sheetData></worksheet>'
    ).encode()
    raw = with_member("suppliers.xlsx", "xl/worksheets/sheet1.xml", sheet)
    assert "over max_document_bytes (5,000,000)" in refused(tmp_path, "big.xlsx", raw, 5_000_000)
