"""Terminal tables that fit the terminal: kubectl-style aligned columns, no borders.

A table narrower than the terminal is printed whole. A wider one gives up space in this
order, each step only as far as needed:

1. prose columns (``Fit.WRAP``) wrap down to their ``min`` width, or (``spill``) keep their
   first part and put the rest on a line under the row: nothing is lost;
2. all-blank droppable columns (every cell ``-``) are hidden;
3. names (``Fit.MIDDLE``) longer than their ``soft`` width are cut in the middle, where the
   column's names agree, so that both ends and what tells the rows apart stay;
4. droppable columns are hidden, the highest ``drop`` first (a narrower one may come back
   if it fits), and a line under the table names them;
5. names are cut down to their ``min`` width. Past that the lines are longer than the
   terminal (only at widths no table of gpubot fits).

``-o wide`` and output to no terminal (a pipe, unless ``COLUMNS`` is set) print every
column whole, so that ``grep`` sees full rows.

Widths are terminal cells: East Asian wide characters count two, combining marks none
(``unicodedata``). No library: rich (the obvious one) and its pygments weigh ~12 MB, which
takes the base install over its 200 MB budget (tests/test_wheel.py), no library hides
columns by priority or cuts in the middle, and Kubernetes names are ASCII by validation.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TextIO

GAP = 2  # spaces between columns
ELLIPSIS = "…"
NOTE_INDENT = 4
KEEP = 3  # characters a cut name keeps at each end, at least
BLANK = frozenset({"", "-"})
# SGR codes of the style names the text templates' ``paint`` filter takes too.
ANSI = {"critical": "1;31", "warning": "33", "info": "36", "ok": "32", "bold": "1",
        "dim": "2"}


class Fit(Enum):
    FIXED = "fixed"    # numbers, states, codes: never cut
    MIDDLE = "middle"  # names: cut in the middle
    WRAP = "wrap"      # prose: wrapped on spaces


@dataclass(frozen=True)
class Column:
    header: str
    fit: Fit = Fit.FIXED
    drop: int = 0   # 0: always shown; else hidden when too narrow, the highest first
    soft: int = 0   # MIDDLE: width cut to before any column is hidden (0: its min)
    min: int = 0    # MIDDLE and WRAP: the narrowest it gets (never under its header)
    right: bool = False
    # WRAP: too narrow for its longest cell on one line, it holds each cell's first part
    # and the rest goes on a line under the row.
    spill: bool = False
    wide: bool | None = None  # True: only with -o wide; False: only without; None: both


@dataclass(frozen=True)
class Styled:
    """Text in one of the ``ANSI`` styles (in colour only when colour is on)."""

    text: str
    style: str


Cell = str | Styled | tuple[str | Styled, ...]


@dataclass
class Row:
    cells: Sequence[Cell]
    notes: Sequence[Cell] = field(default_factory=tuple)  # lines under the row, indented


def terminal_width(out: TextIO, environ: Mapping[str, str]) -> int | None:
    """The width tables fit. On a terminal, its width (``COLUMNS`` if the size cannot be
    read); elsewhere ``COLUMNS`` when set; else None: no limit, whole rows for pipes."""
    columns = environ.get("COLUMNS", "")
    asked = int(columns) if columns.isdigit() and int(columns) > 0 else None
    try:
        tty = out.isatty()
    except ValueError:  # closed
        tty = False
    if tty:
        try:
            size = os.get_terminal_size(out.fileno()).columns
        except (OSError, ValueError, AttributeError):
            size = 0
        return size or asked or 80
    return asked


def char_width(ch: str) -> int:
    if ch.isascii():
        return 1 if ch.isprintable() else 0
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def cell_len(s: str) -> int:
    """How many terminal cells ``s`` takes."""
    return len(s) if s.isascii() and s.isprintable() else sum(map(char_width, s))


@dataclass(frozen=True)
class _Text:
    """Text with a style (or None) per character: cut, wrapped and padded as one."""

    plain: str = ""
    styles: tuple[str | None, ...] = ()

    @classmethod
    def of(cls, cell: Cell) -> _Text:
        out = cls()
        for part in cell if isinstance(cell, tuple) else (cell,):
            text, style = (part.text, part.style) if isinstance(part, Styled) else (part, None)
            out = out + cls(text, (style,) * len(text))
        return out

    @staticmethod
    def join(pieces: Iterable[_Text]) -> _Text:
        texts = list(pieces)
        return _Text("".join(t.plain for t in texts),
                     tuple(st for t in texts for st in t.styles))

    def __add__(self, other: _Text) -> _Text:
        return _Text(self.plain + other.plain, self.styles + other.styles)

    def __getitem__(self, s: slice) -> _Text:
        return _Text(self.plain[s], self.styles[s])

    @property
    def width(self) -> int:
        return cell_len(self.plain)

    def render(self, color: bool) -> str:
        if not color:
            return self.plain
        out, i = [], 0
        while i < len(self.plain):
            j = i
            while j < len(self.plain) and self.styles[j] == self.styles[i]:
                j += 1
            code = ANSI.get(self.styles[i] or "")
            out.append(f"\x1b[{code}m{self.plain[i:j]}\x1b[0m" if code else self.plain[i:j])
            i = j
        return "".join(out)


def _spaces(n: int) -> _Text:
    return _Text(" " * n, (None,) * n)


def render(columns: Sequence[Column], rows: Sequence[Row | Sequence[Cell]], *,
           width: int | None, wide: bool = False, color: bool = False, indent: int = 0) -> str:
    """The table as lines (each ending in a newline), ``indent`` spaces in. Each row has a
    cell for every column of ``columns``; those not shown in this mode are left out."""
    shown = [j for j, c in enumerate(columns) if c.wide is None or c.wide == wide]
    cols = [columns[j] for j in shown]
    body = [r if isinstance(r, Row) else Row(r) for r in rows]
    raw = [[r.cells[j] for j in shown] for r in body]
    notes: list[list[Cell]] = [[] for _ in body]
    avail = None if wide or width is None else max(1, width - indent)
    texts = [[_Text.of(c) for c in row] for row in raw]
    keep, widths = _layout(cols, texts, avail)
    spill = [i for i in keep if cols[i].spill and widths[i] < _natural(cols[i], texts, i)]
    if spill:  # a head in the column, the rest on a line of its own under the row
        for i in spill:
            cols[i] = replace(cols[i], fit=Fit.FIXED)
            for k, row in enumerate(raw):
                head, rest = _split(row[i])
                texts[k][i] = _Text.of(head)
                if rest:
                    notes[k].append(rest)
        keep, widths = _layout(cols, texts, avail)
    for k, given in enumerate(body):
        notes[k] += given.notes
    hidden = [cols[i].header for i in range(len(cols)) if i not in keep]
    cols = [cols[i] for i in keep]
    cells = [[row[i] for i in keep] for row in texts]
    widths = [widths[i] for i in keep]
    agree = [_agreement([row[i].plain for row in cells]) if c.fit is Fit.MIDDLE else (0, 0)
             for i, c in enumerate(cols)]
    lines: list[_Text] = []
    for r, cs in enumerate([[_Text.of(c.header) for c in cols], *cells]):
        parts = [_lay(t, c, w, agree[i]) for i, (t, c, w) in enumerate(zip(cs, cols, widths,
                                                                          strict=True))]
        for k in range(max(len(p) for p in parts)):
            pieces = [_spaces(indent)]
            for i, p in enumerate(parts):
                cell = p[k] if k < len(p) else _Text()
                fill = _spaces(max(0, widths[i] - cell.width))
                pieces += [_spaces(GAP if i else 0), *((fill, cell) if cols[i].right
                                                       else (cell, fill))]
            lines.append(_rstrip(_Text.join(pieces)))
        for note in notes[r - 1] if r else ():
            lines += _note(_Text.of(note), avail, indent + NOTE_INDENT)
    if hidden:
        lines += _note(_Text.of(Styled(f"{', '.join(hidden)} hidden to fit {width} columns: "
                                       "-o wide shows them", "dim")), avail, indent)
    return "".join(line.render(color) + "\n" for line in lines)


def _natural(c: Column, texts: Sequence[Sequence[_Text]], i: int) -> int:
    return max([cell_len(c.header)] + [row[i].width for row in texts])


def _layout(cols: Sequence[Column], texts: Sequence[Sequence[_Text]], avail: int | None
            ) -> tuple[list[int], list[int]]:
    natural = [_natural(c, texts, i) for i, c in enumerate(cols)]
    if avail is None:
        return list(range(len(cols))), natural
    blank = [all(row[i].plain in BLANK for row in texts) for i in range(len(cols))]
    return _fit(cols, natural, blank, avail)


def _split(cell: Cell) -> tuple[Cell, Cell | None]:
    """A cell's first part and the rest (None when it has one part)."""
    if not isinstance(cell, tuple) or len(cell) < 2:
        return cell, None
    first, *rest = cell
    if isinstance(rest[0], str):
        rest[0] = rest[0].lstrip()
    return first, tuple(rest)


def _floor(c: Column, natural: int, head: int, soft: bool) -> int:
    """The narrowest column ``c`` gets at this stage."""
    if c.fit is Fit.FIXED:
        return natural
    least = max(c.min, head) if c.fit is Fit.WRAP or not soft else max(c.soft, c.min, head)
    return min(natural, least)


def _fit(cols: Sequence[Column], natural: Sequence[int], blank: Sequence[bool], avail: int
         ) -> tuple[list[int], list[int]]:
    """Which columns are shown and how wide each is (see the module's docstring)."""
    heads = [cell_len(c.header) for c in cols]

    def need(keep: Sequence[int], names: str) -> int:
        total = GAP * (len(keep) - 1)
        for j in keep:
            c = cols[j]
            if c.fit is Fit.MIDDLE and names == "natural":
                total += natural[j]
            else:
                total += _floor(c, natural[j], heads[j], soft=names == "soft")
        return total

    keep = list(range(len(cols)))
    droppable = sorted((j for j in keep if cols[j].drop),
                       key=lambda j: (not blank[j], -cols[j].drop, -j))
    empties = [j for j in droppable if blank[j]]
    while need(keep, "natural") > avail and empties:  # step 2
        j = empties.pop(0)
        keep.remove(j)
        droppable.remove(j)
    if need(keep, "natural") <= avail:  # names whole: prose takes the rest
        widths = [natural[j] if cols[j].fit is not Fit.WRAP
                  else _floor(cols[j], natural[j], heads[j], soft=False)
                  for j in range(len(cols))]
        _grow(widths, [j for j in keep if cols[j].fit is Fit.WRAP], natural,
              avail - need(keep, "natural"))
        return keep, widths
    dropped = []
    while need(keep, "soft") > avail and droppable:  # steps 3, 4
        dropped.append(droppable.pop(0))
        keep.remove(dropped[-1])
    for j in reversed(dropped[:-1]):  # a narrower, less useful column may still fit
        if need(sorted([*keep, j]), "soft") <= avail:
            keep = sorted([*keep, j])
    soft = need(keep, "soft") <= avail  # else step 5
    widths = [_floor(cols[j], natural[j], heads[j], soft=soft) for j in range(len(cols))]
    slack = _grow(widths, [j for j in keep if cols[j].fit is Fit.MIDDLE], natural,
                  avail - need(keep, "soft" if soft else "min"))
    _grow(widths, [j for j in keep if cols[j].fit is Fit.WRAP], natural, slack)
    return keep, widths


def _grow(widths: list[int], which: Sequence[int], natural: Sequence[int], slack: int) -> int:
    """Share ``slack`` among columns ``which``, narrowest first, none past its natural
    width (water-filling: the widest cut columns end equal). Returns what is left."""
    while slack > 0:
        short = [j for j in which if widths[j] < natural[j]]
        if not short:
            return slack
        low = min(widths[j] for j in short)
        for j in short:
            if widths[j] == low and slack > 0:
                widths[j] += 1
                slack -= 1
    return max(0, slack)


def _agreement(values: Sequence[str]) -> tuple[int, int]:
    """How many leading and trailing characters every value of a column shares: a cut
    there loses nothing that tells the rows apart. (0, 0) for fewer than two values."""
    if len(set(values)) < 2:
        return 0, 0
    return _shared(values), _shared([v[::-1] for v in values])


def _shared(values: Sequence[str]) -> int:
    """The length of the prefix every value starts with."""
    first, last = min(values), max(values)  # the extremes differ first
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n


def _lay(t: _Text, c: Column, width: int, agree: tuple[int, int]) -> list[_Text]:
    """A cell's lines at ``width``."""
    if t.width <= width:
        return [t]
    if c.fit is Fit.WRAP:
        return _wrap(t, width)
    if c.fit is Fit.MIDDLE:
        return [_middle(t, width, agree)]
    return [t]


def _middle(t: _Text, width: int, agree: tuple[int, int]) -> _Text:
    """``t`` cut to ``width`` cells with an ellipsis inside: of the cuts that keep at least
    ``KEEP`` characters at each end, the one keeping most of what differs from the other
    rows (between the shared lead and tail ``agree``), the most central on a tie."""
    s = t.plain
    n = len(s)
    budget = width - 1
    cells = [0]  # cells[i]: the width of s[:i]
    for ch in s:
        cells.append(cells[-1] + char_width(ch))
    start, end = agree[0], max(agree[0], n - agree[1])  # what tells this row apart
    best: tuple[int, int] | None = None
    cut = (0, 0)
    tail = n - KEEP
    for h in range(KEEP, n - KEEP):
        while tail > 0 and cells[n] - cells[n - tail] > budget - cells[h]:
            tail -= 1  # fewer cells for the tail as the head grows
        if tail < KEEP:
            break
        kept = max(0, min(h, end) - start) + max(0, end - max(n - tail, start))
        score = (kept, -abs(2 * cells[h] - budget))
        if best is None or score > best:
            best, cut = score, (h, tail)
    mark = _Text(ELLIPSIS, (None,))
    if best is None:  # too narrow for two ends: the head only
        h = 0
        while h < n and cells[h + 1] <= budget:
            h += 1
        return t[:h] + mark
    h, tail = cut
    return t[:h] + mark + t[n - tail:]


def _wrap(t: _Text, width: int) -> list[_Text]:
    """``t`` in lines of at most ``width`` cells, broken at spaces; a word longer than a
    line is broken where the line ends."""
    lines: list[_Text] = []
    start = end = used = 0
    started = False
    for m in re.finditer(r"\S+", t.plain):
        a, b = m.span()
        gap = cell_len(t.plain[end:a]) if started else 0
        w = cell_len(t.plain[a:b])
        if started and used + gap + w <= width:
            end, used = b, used + gap + w
            continue
        if started:
            lines.append(t[start:end])
        while w > width:  # fold a word no line holds
            cut, cells = a, 0
            while cells + char_width(t.plain[cut]) <= width:
                cells += char_width(t.plain[cut])
                cut += 1
            cut = max(cut, a + 1)
            lines.append(t[a:cut])
            a = cut
            w = cell_len(t.plain[a:b])
        start, end, used, started = a, b, w, True
    if started:
        lines.append(t[start:end])
    return lines or [t[:0]]


def _rstrip(t: _Text) -> _Text:
    return t[: len(t.plain.rstrip())]


def _note(text: _Text, avail: int | None, indent: int) -> Iterable[_Text]:
    lines = [text] if avail is None or avail - indent < 20 else _wrap(text, avail - indent)
    return [_spaces(indent) + line for line in lines]
