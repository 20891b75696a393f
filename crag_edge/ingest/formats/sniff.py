"""What a file holds, told by its first bytes and (for ZIP containers) its member names,
never by its name: a file whose extension lies is refused with what it really is."""

from __future__ import annotations

import io
import zipfile

# OLE2 compound files: legacy .doc/.xls/.ppt, and every password-protected Office Open XML
# file (the encrypted package sits inside one).
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
_MAGIC = (
    (b"%PDF-", "pdf"),
    (b"{\\rtf", "rtf"),
    (b"\x89PNG", "image"),
    (b"\xff\xd8\xff", "image"),
    (b"GIF8", "image"),
    (b"\x1f\x8b", "gzip"),
)
_ODF_MIMETYPES = {
    b"application/vnd.oasis.opendocument.text": "odt",
    b"application/vnd.oasis.opendocument.presentation": "odp",
    b"application/vnd.oasis.opendocument.spreadsheet": "ods",
    b"application/epub+zip": "epub",
}
_OOXML_PARTS = (("word/document.xml", "docx"), ("ppt/presentation.xml", "pptx"),
                ("xl/workbook.xml", "xlsx"))  # fmt: skip
# What each kind is, for messages.
DESCRIPTIONS = {
    "pdf": "a PDF",
    "rtf": "an RTF document",
    "image": "an image",
    "gzip": "a gzip archive",
    "docx": "a Word document (.docx)",
    "pptx": "a PowerPoint deck (.pptx)",
    "xlsx": "an Excel workbook (.xlsx)",
    "odt": "an OpenDocument text (.odt)",
    "odp": "an OpenDocument presentation (.odp)",
    "ods": "an OpenDocument spreadsheet (.ods)",
    "epub": "an EPUB book (.epub)",
    "zip": "a ZIP archive",
    "zip-damaged": "a damaged ZIP archive",
    "encrypted-office": "a password-protected Office file",
    "ole": "a legacy Office file (.doc, .xls or .ppt)",
    "text": "text",
}


def sniff(raw: bytes) -> str:
    """The kind of content in `raw`: a key of `DESCRIPTIONS` ("text" for anything else)."""
    head = raw[:1024]
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head.startswith(_OLE):
        return "encrypted-office" if _ENCRYPTED_PACKAGE in raw else "ole"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_kind(raw)
    return "text"


def _zip_kind(raw: bytes) -> str:
    """OpenDocument and EPUB name themselves in a `mimetype` member, Office Open XML files by
    their main part; a damaged container is taken at its word (the loader reports it)."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as container:
            names = set(container.namelist())
            if "mimetype" in names and container.getinfo("mimetype").file_size < 200:
                kind = _ODF_MIMETYPES.get(container.read("mimetype").strip())
                if kind:
                    return kind
    except (zipfile.BadZipFile, EOFError, ValueError, OSError, RuntimeError):
        return "zip-damaged"
    return next((kind for part, kind in _OOXML_PARTS if part in names), "zip")
