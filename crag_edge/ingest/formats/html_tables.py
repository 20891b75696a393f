"""HTML tables gathered cell by cell, then written as rows that read alone.

A table with column names (a `thead`, or leading rows of `th` cells) is written as its header
line and then one record per row, each prefixed by the table's caption: `Numeric Types:
Name: bigint; Storage Size: 8 bytes; ...` (`builder.record`, as spreadsheet rows are), so a
row retrieved alone still says which table it is from and what each value is. A table
without column names is layout or a list: its rows are written as lines, cells side by side.
`colspan` and `rowspan` are expanded so each value stands under its column's name; both are
capped (`MAX_SPAN`), since a hostile `colspan="1000000"` must not become a million cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crag_edge.ingest.formats.builder import record

# The widest span honoured; HTML caps colspan at 1,000, but no readable table is that wide.
MAX_SPAN = 100
# Tables nested deeper than this are read as cells of the one at this depth: each level's
# text is copied into its parent's cell, so 100,000 nested tables (a hostile page) would
# cost 100,000 copies of the text; no page nests readable tables this deep.
MAX_TABLE_DEPTH = 8
# The most columns a row is read into, and how much longer than its cells' own text a
# table's records may be (column names repeat on every row): past either, a hostile table
# of long names or spans over many rows would be megabytes of text from a few kilobytes.
MAX_COLUMNS = 200
MAX_GROWTH = 8


@dataclass
class Cell:
    """One `td` or `th` being read: its text parts and how far it spans."""

    header: bool
    colspan: int = 1
    rowspan: int = 1
    parts: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The cell's lines, each with its whitespace collapsed, blank ones dropped."""
        lines = (" ".join(line.split()) for line in "".join(self.parts).split("\n"))
        return "\n".join(line for line in lines if line)


@dataclass
class Row:
    cells: list[Cell] = field(default_factory=list)
    in_head: bool = False


@dataclass(frozen=True)
class Rendered:
    """A table as text: `lead` (caption and header line) and one text per data row; `named`
    when the rows are records under column names (each then a row of its own for citations)."""

    lead: list[str]
    rows: list[str]
    named: bool


def span(value: str | None) -> int:
    """A `colspan`/`rowspan` attribute as a count in [1, MAX_SPAN]; 1 when it is no number."""
    try:
        count = int(value or "1")
    except ValueError:
        return 1
    return min(max(count, 1), MAX_SPAN)


@dataclass
class Table:
    """A table being read: rows of cells, its caption, whether a `thead` is open."""

    caption: str = ""
    caption_parts: list[str] | None = None  # while a <caption> is being read
    rows: list[Row] = field(default_factory=list)
    in_head: bool = False

    def start_row(self) -> None:
        self.rows.append(Row(in_head=self.in_head))

    def start_cell(self, header: bool, colspan: int, rowspan: int) -> None:
        if not self.rows:
            self.start_row()
        self.rows[-1].cells.append(Cell(header, colspan, rowspan))

    def add(self, text: str) -> None:
        """Text read inside the table: into its caption, else its current cell (text
        between cells, stray in broken HTML, goes to a cell of its own)."""
        if self.caption_parts is not None:
            self.caption_parts.append(text)
            return
        if not self.rows or not self.rows[-1].cells:
            if not text.strip():
                return
            self.start_cell(False, 1, 1)
        self.rows[-1].cells[-1].parts.append(text)

    def close_caption(self) -> None:
        if self.caption_parts is not None:
            self.caption = " ".join("".join(self.caption_parts).split())
            self.caption_parts = None

    def render(self, fallback_caption: str) -> Rendered:
        """The table as text; `fallback_caption` names it when it has no <caption>."""
        grid = _grid(self.rows)
        header_rows = _header_rows(self.rows, grid)
        lines = Rendered([], [" ".join(c for c in cells if c) for cells in grid], False)
        if not header_rows:
            return lines
        header = _column_names(grid[:header_rows])
        caption = self.caption or fallback_caption
        rows = [
            f"{caption}: {line}" if caption else line
            for cells in grid[header_rows:]
            if (line := record(header, [" ".join(c.split()) for c in cells]))
        ]
        lead = ([self.caption] if self.caption else []) + [" | ".join(n for n in header if n)]
        own = sum(len(cell.text()) for row in self.rows for cell in row.cells)
        if sum(map(len, rows)) > MAX_GROWTH * own + 10_000:
            return lines
        return Rendered(lead, rows, True)


def _grid(rows: list[Row]) -> list[list[str]]:
    """Each row's cell texts by column, spans expanded: a `colspan` cell's text in its first
    column (its other columns empty), a `rowspan` cell's in every row it covers."""
    grid: list[list[str]] = []
    pending: dict[int, tuple[int, str]] = {}  # column -> (rows still covered, text)
    for row in rows:
        cells: list[str] = []
        queue = list(row.cells)
        while (queue or any(col >= len(cells) for col in pending)) and len(cells) < MAX_COLUMNS:
            column = len(cells)
            if column in pending:
                left, text = pending.pop(column)
                cells.append(text)
                if left > 1:
                    pending[column] = (left - 1, text)
            elif queue:
                cell = queue.pop(0)
                text = cell.text()
                if cell.rowspan > 1:
                    pending[column] = (cell.rowspan - 1, text)
                cells.extend([text] + [""] * (cell.colspan - 1))
            else:
                cells.append("")
        grid.append(cells)
    return grid


def _header_rows(rows: list[Row], grid: list[list[str]]) -> int:
    """How many leading rows name the columns: those in a `thead`, else those made only of
    `th` cells; 0 when no row is left under them (a table of names only names nothing)."""
    count = 0
    for row, cells in zip(rows, grid, strict=True):
        heads = row.in_head or (row.cells and all(cell.header for cell in row.cells))
        if not heads or not any(cells):
            break
        count += 1
    return count if count < len(rows) else 0


def _column_names(header_rows: list[list[str]]) -> list[str]:
    """One name per column: the header rows' texts above it, a group's name (a `colspan`
    header above several) carried over the columns it spans."""
    width = max(len(cells) for cells in header_rows)
    names: list[list[str]] = [[] for _ in range(width)]
    for cells in header_rows:
        carried = ""
        for column in range(width):
            text = cells[column] if column < len(cells) else ""
            carried = text or (carried if len(header_rows) > 1 else "")
            if carried and carried not in names[column]:
                names[column].append(carried)
    return [" ".join(" ".join(parts).split()) for parts in names]
