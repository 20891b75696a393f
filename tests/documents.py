"""Tiny real documents for loader and ingest tests (no fixtures files to keep in the repo)."""

from __future__ import annotations


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF: each page's text in Helvetica, a printed line per line of it
    (lines 14 points apart, from the top), optional /Info title."""
    streams = []
    for text in pages:
        lines = " Tj T* ".join(f"({line})" for line in text.split("\n"))
        streams.append(f"BT /F1 12 Tf 14 TL 72 720 Td {lines} Tj ET")
    return drawn_pdf(streams, title)


def drawn_pdf(streams: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF whose pages draw the content streams `streams` (font `/F1`:
    Helvetica), optional /Info title."""
    count = len(streams)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = {
        1: "<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
        3: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    for i, stream in enumerate(streams):
        objects[4 + 2 * i] = (
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
        )
        objects[5 + 2 * i] = f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream"
    trailer = ""
    if title is not None:
        objects[4 + 2 * count] = f"<< /Title ({title}) >>"
        trailer = f" /Info {4 + 2 * count} 0 R"
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += f"{number} 0 obj\n{objects[number]}\nendobj\n".encode("latin-1")
    xref, size = len(out), len(objects) + 1
    out += f"xref\n0 {size}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offsets[n]:010d} 00000 n \n".encode() for n in range(1, size))
    out += f"trailer\n<< /Size {size} /Root 1 0 R{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
