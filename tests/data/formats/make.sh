#!/usr/bin/env bash
# Regenerates the committed format fixtures from sources/ with real tools (Debian packages:
# pandoc, libreoffice-writer-nogui, libreoffice-impress-nogui, libreoffice-calc-nogui,
# poppler-utils, img2pdf). Run from this folder: bash make.sh
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
office() { soffice --headless -env:UserInstallation=file://$work/profile --convert-to "$@" >/dev/null 2>&1; }

pandoc sources/handbook.md -o handbook.docx          # headings, list, table, footnote, tracked changes
pandoc sources/plan.md -o plan.docx                  # attached to a message of the mail tests
pandoc sources/deck.md -o deck.pptx                  # slides with a title, a table and speaker notes
pandoc sources/book.md -o book.epub --epub-chapter-level=1  # one chapter per top-level heading
pandoc sources/handbook.md -s -o handbook.rtf
office odt --outdir "$work" handbook.docx && mv "$work/handbook.odt" handbook.odt  # keeps tracked changes
office odp --outdir "$work" deck.pptx && mv "$work/deck.odp" deck.odp
office xlsx --outdir "$work" sources/suppliers.csv && mv "$work/suppliers.xlsx" suppliers.xlsx
office ods --outdir "$work" sources/crew.csv && mv "$work/crew.ods" crew.ods
cp sources/crew.csv crew.csv
pandoc sources/money-type.md -o money-type.odt       # a captioned table of one row
pandoc sources/boolean-type.md -o boolean-type.docx
pandoc sources/numeric-types.md -o numeric-types.docx  # a wide table of ten rows
# Dates, times, percentages and currency, each cell shown by its number format.
office xlsx --outdir "$work" sources/values.fods && mv "$work/values.xlsx" values.xlsx
office ods --outdir "$work" sources/values.fods && mv "$work/values.ods" values.ods
# A scanned PDF: a text PDF rasterised to page images, the images put back in a PDF.
pandoc sources/scan.md -o "$work/scan.docx"
office pdf --outdir "$work" "$work/scan.docx"
pdftoppm -r 150 -gray -png "$work/scan.pdf" "$work/page"
img2pdf "$work"/page-*.png -o scan.pdf
# A 4-page PDF with a running head, "Page N of 4" feet and words broken at soft hyphens.
office pdf --outdir "$work" sources/manual.fodt && mv "$work/manual.pdf" manual.pdf
# A PDF with a ruled table (LibreOffice draws its borders as lines).
office pdf:writer_pdf_Export --outdir "$work" sources/tables.html && mv "$work/tables.pdf" tables.pdf

# A password-protected Word file (password "secret"), encrypted as Office does it, by
# msoffcrypto-tool (pip install msoffcrypto-tool; it is needed only to remake this file).
msoffcrypto-tool -e -p secret handbook.docx locked.docx
ls -l
