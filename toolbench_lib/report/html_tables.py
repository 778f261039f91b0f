"""The notebooks page's tables made to fit it: cells formatted, a plain index hidden, a too-wide one split."""

from __future__ import annotations

import re

NA_TEXTS = {"NaN", "nan", "<NA>", "NaT", "None", ""}
NA = "n/a"
MAX_DECIMALS = 4
# The estimated width (in characters) a table may take: about 1,000 px of the page's 1,280.
MAX_TABLE_CHARS = 130
MAX_CELL_CHARS = 28  # a longer cell wraps (CSS), so it counts this much towards the width
TRANSPOSE_MAX_ROWS = 8
FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+")
INTEGER = re.compile(r"[-+]?\d+")


def format_cell(text: str) -> tuple[str, bool]:
    """A cell's shown text and whether it is a number: ``n/a`` for missing values, long floats rounded."""
    t = text.strip()
    if t in NA_TEXTS:
        return NA, False
    if INTEGER.fullmatch(t):
        return t, True
    if FLOAT.fullmatch(t):
        decimals = len(t.split(".")[1].split("e")[0].split("E")[0]) if "." in t else 0
        if "e" not in t.lower() and decimals > MAX_DECIMALS:
            v = float(t)
            t = f"{v:.{MAX_DECIMALS}f}" if abs(v) >= 10 ** -MAX_DECIMALS or v == 0 else f"{v:.2e}"
        return t, True
    return text, False


def _grid(table) -> tuple[list[list[str]], list[list[str]]] | None:
    """The table as header rows and body rows of texts, spans expanded; None when it is not rectangular."""

    def rows_of(section) -> list[list[str]]:
        out: list[list[str]] = []
        pending: dict[int, tuple[str, int]] = {}  # column -> (text, rows still covered by a rowspan)
        for tr in section:
            row: list[str] = []
            cells = iter(tr.find_all(["td", "th"], recursive=False))
            col = 0
            while True:
                if col in pending:
                    text, left = pending[col]
                    row.append(text)
                    pending[col] = (text, left - 1)
                    if left - 1 == 0:
                        del pending[col]
                    col += 1
                    continue
                cell = next(cells, None)
                if cell is None:
                    break
                text = cell.get_text(" ", strip=True)
                span = int(cell.get("colspan", 1) or 1)
                rspan = int(cell.get("rowspan", 1) or 1)
                for j in range(span):
                    row.append(text)
                    if rspan > 1:
                        pending[col + j] = (text, rspan - 1)
                col += span
            out.append(row)
        return out

    head_rows = [tr for tr in table.find_all("tr") if tr.find_parent("thead") is not None]
    body_rows = [tr for tr in table.find_all("tr") if tr.find_parent("thead") is None]
    if not head_rows and body_rows and not body_rows[0].find("td"):
        head_rows, body_rows = body_rows[:1], body_rows[1:]
    head, body = rows_of(head_rows), rows_of(body_rows)
    widths = {len(r) for r in head + body}
    if len(widths) != 1 or not body:
        return None
    return head, body


def _plain_index(table, body: list[list[str]]) -> bool:
    """Whether the first column is a pandas row index of bare integers (0, 1, 2, ...)."""
    rows = [tr for tr in table.find_all("tr") if tr.find_parent("thead") is None]
    firsts = [tr.find(["td", "th"], recursive=False) for tr in rows]
    return bool(body) and all(c is not None and c.name == "th" for c in firsts) and all(
        INTEGER.fullmatch(r[0].strip()) for r in body)


def _header(head: list[list[str]], n: int) -> list[str]:
    """One header text per column: the distinct texts of its header rows joined."""
    names = []
    for j in range(n):
        parts = [r[j] for r in head if r[j].strip()]
        names.append(" · ".join(dict.fromkeys(parts)))
    return names


def _width(column: list[str]) -> int:
    return min(max((len(c) for c in column), default=1), MAX_CELL_CHARS) + 3


def _build(soup, header: list[str], rows: list[list[tuple[str, bool]]], numeric: list[bool],
           caption: str | None, classes: list[str]):
    table = soup.new_tag("table", attrs={"class": " ".join(classes + ["tidy"])})
    if caption:
        cap = soup.new_tag("caption")
        cap.string = caption
        table.append(cap)
    thead, tbody = soup.new_tag("thead"), soup.new_tag("tbody")
    tr = soup.new_tag("tr")
    for name, num in zip(header, numeric, strict=True):
        th = soup.new_tag("th", attrs={"class": "num"} if num else {})
        th.string = name
        tr.append(th)
    thead.append(tr)
    for row in rows:
        tr = soup.new_tag("tr")
        for text, num in row:
            td = soup.new_tag("td", attrs={"class": "num"} if num else {})
            td.string = text
            tr.append(td)
        tbody.append(tr)
    table.append(thead)
    table.append(tbody)
    return table


def tidy_table(soup, table) -> None:
    """Rewrite one table in place: plain index dropped, cells formatted, split or transposed if too wide."""
    grid = _grid(table)
    if grid is None:
        for td in table.find_all("td"):
            if td.get_text(strip=True) in NA_TEXTS - {""}:
                td.string = NA
        return
    head, body = grid
    n = len(body[0])
    classes = [c for c in table.get("class", []) if c != "tidy"]
    drop = 1 if _plain_index(table, body) and n > 1 else 0
    header = _header(head, n)[drop:] if head else [""] * (n - drop)
    cells = [[format_cell(c) for c in r[drop:]] for r in body]
    numeric = [all(row[j][1] or row[j][0] == NA for row in cells) and any(row[j][1] for row in cells)
               for j in range(len(header))]
    widths = [max(_width([header[j]]) - 3, _width([row[j][0] for row in cells])) for j in range(len(header))]
    tables = [(header, cells, numeric, None)]
    if sum(widths) > MAX_TABLE_CHARS:
        tables = _fit(header, cells, numeric, widths)
    parts = [_build(soup, h, r, nm, cap, classes) for h, r, nm, cap in tables]
    for part in parts:
        table.insert_before(part)
    table.decompose()


def _fit(header, cells, numeric, widths):
    """A too-wide table as one transposed table (few rows) or as column groups repeating its labels."""
    labels = 0
    while labels < len(header) - 1 and not numeric[labels]:
        labels += 1
    if len(cells) <= TRANSPOSE_MAX_ROWS:
        names = [" · ".join(row[j][0] for j in range(labels)) or f"row {i + 1}"
                 for i, row in enumerate(cells)]
        t_header = [" · ".join(header[:labels]) or "", *names]
        t_rows = [[(header[j], False), *[row[j] for row in cells]] for j in range(labels, len(header))]
        t_numeric = [False, *[all(r[i + 1][1] or r[i + 1][0] == NA for r in t_rows)
                              for i in range(len(names))]]
        t_widths = [_width([r[i][0] for r in t_rows] + [t_header[i]]) for i in range(len(t_header))]
        if sum(t_widths) <= MAX_TABLE_CHARS:
            return [(t_header, t_rows, t_numeric, "shown transposed: one column per row of the table")]
    base = sum(widths[:labels])
    groups: list[list[int]] = []
    for j in range(labels, len(header)):
        if not groups or base + sum(widths[i] for i in groups[-1]) + widths[j] > MAX_TABLE_CHARS:
            groups.append([])
        groups[-1].append(j)
    out = []
    for g, cols in enumerate(groups):
        keep = list(range(labels)) + cols
        out.append(([header[j] for j in keep], [[row[j] for j in keep] for row in cells],
                    [numeric[j] for j in keep],
                    f"columns {cols[0] + 1}–{cols[-1] + 1} of {len(header)} (part {g + 1} of {len(groups)})"))
    return out
