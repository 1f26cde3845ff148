"""`presk explain … --pdf`: the document's markdown typeset by typst into DIR/explain.pdf.

The markdown is parsed by markdown-it (CommonMark and pipe tables) and each node becomes
typst code, never typst markup: every piece of text is a string literal (`#"…"`), every
construct a function call (`#heading`, `#table`, `#raw`, `#image`), so no character of
the document — `*`, `_`, `$`, `#`, `@`, `<`, `//`, a backslash — can be read by typst as
syntax. The constructs are the document's: headings, paragraphs, emphasis, inline code,
links, images, fenced and indented code, lists, pipe tables, rules. Any other node (a
block quote, HTML) raises `UnsupportedMarkdown` with its line: it must not vanish from
the PDF unnoticed. An HTML comment is left out (it is for the markdown's reader).

Tables fit the page: a table's width is estimated from its cells' characters, and it is
set smaller as it grows; one too wide even then is set on a landscape page with columns
that wrap, long names broken after `/`, `.`, `_`. A code listing is set smaller when its
lines are long, and wrapped when they are longer still, each continuation line marked `↪`,
so no line runs off the page.

The PDF is deterministic: typst's own fonts only (no system font can change a glyph),
the document's date none, no timestamp; two runs on the same files give the same bytes.
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

from presk.analysis.artifact import write_atomic

# A listing is set at CODE_SIZES[0] when its longest line fits, else smaller down to
# CODE_SIZES[1], and wrapped only when it is too long even then.
CODE_SIZES = (7.5, 6.0)
MONO_ADVANCE = 0.62  # DejaVu Sans Mono's advance is 0.602 em; a little room besides
TEXT_WIDTH_PT = 595.28 - 2 * 56.69 - 8  # A4 less the 2 cm margins and the block's inset
CONTINUATION = "↪ "
PAGE_HEIGHT_IN = 9.0  # the tallest a picture is set (A4's text height is 10.1 in)

PREAMBLE = f"""\
#set document(date: none{{title}})
#set page(paper: "a4", margin: 2cm, numbering: "1")
#set text(font: ("Libertinus Serif", "New Computer Modern", "DejaVu Sans Mono"), size: 10pt)
#set par(justify: false)
#show raw: set text(font: "DejaVu Sans Mono")
#show raw.where(block: false): set text(size: 1.1em)
#show raw.where(block: true): set text(size: {CODE_SIZES[0]}pt)
#show raw.where(block: true): it => block(fill: luma(246), inset: 4pt, radius: 2pt, \
width: 100%, it)
#show link: set text(fill: rgb("#1f3b73"))
#set table(stroke: 0.4pt + luma(170), inset: (x: 3pt, y: 2.5pt))
"""

# (the widest a table may be, in characters of its cells plus 3 a column, the font size
# it is set in), tried in order. A wider table wraps its long columns; one of at least
# LANDSCAPE_MIN_COLUMNS columns goes on a landscape page instead, and wraps only when it is
# wider than LANDSCAPE_WIDTH even there.
TABLE_SIZES = [(110, 9.0), (135, 7.5), (160, 6.5)]
WRAP_SIZE = 7.5
LANDSCAPE_MIN_COLUMNS = 7
LANDSCAPE_WIDTH = 240  # at 6.5 pt
SHORT_COLUMN = 16  # a column whose cells are at most this long keeps its width
WRAP_CAP = 40  # a wrapping column's share of the width is its cells' length, at most this


class UnsupportedMarkdown(ValueError):
    """A markdown construct this module does not typeset (with the line it starts on)."""


class PdfError(RuntimeError):
    """typst is missing or refused the document (one line: why)."""


def write_pdf(markdown_path: str, pdf_path: str) -> None:
    """Typeset the markdown file into `pdf_path` (images relative to the file's folder)."""
    with open(markdown_path, encoding="utf-8") as f:
        source = to_typst(f.read(), os.path.dirname(os.path.abspath(markdown_path)))
    write_atomic(pdf_path, compile_typst(source))


def compile_typst(source: str) -> bytes:
    """The PDF of a typst source whose paths are absolute (the root is `/`)."""
    try:
        import typst
    except ImportError as e:  # a dependency (pyproject); only a broken install lacks it
        raise PdfError(f"the typst package is not installed ({e})") from None
    try:
        return typst.compile(source.encode("utf-8"), root="/", ignore_system_fonts=True)
    except typst.TypstError as e:
        raise PdfError(f"typst: {str(e).splitlines()[0] if str(e) else 'failed'}") from None


def to_typst(markdown: str, base: str) -> str:
    """The typst source of a markdown document; `base` is the folder its images are in."""
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode
    root = SyntaxTreeNode(MarkdownIt("commonmark").enable("table").parse(markdown))
    writer = _Writer(base)
    body = writer.blocks(root.children)
    title = f", title: {string(writer.title)}" if writer.title else ""
    return PREAMBLE.replace("{title}", title) + "\n" + body + "\n"


def string(text: str) -> str:
    """`text` as a typst string literal: its characters exactly, nothing read as syntax."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def code_size(longest: int) -> tuple[float, int]:
    """(the font size a listing whose longest line has `longest` characters is set in,
    the characters a line holds at that size)."""
    size = TEXT_WIDTH_PT / (MONO_ADVANCE * max(longest, 1))
    size = math.floor(min(max(size, CODE_SIZES[1]), CODE_SIZES[0]) * 10) / 10
    return size, int(TEXT_WIDTH_PT / (MONO_ADVANCE * size))


def wrap_code(text: str, columns: int) -> str:
    """Each line longer than `columns` broken, at its last space in the second half of the
    width when it has one, else at the width; continuation lines start with `↪ `."""
    out: list[str] = []
    for line in text.split("\n"):
        prefix, width = "", columns
        while len(line) > width:
            cut = line.rfind(" ", width // 2, width)
            cut = cut + 1 if cut > 0 else width
            out.append(prefix + line[:cut].rstrip())
            line = line[cut:]
            prefix, width = CONTINUATION, columns - len(CONTINUATION)
        out.append(prefix + line)
    return "\n".join(out)


def break_points(text: str) -> str:
    """`text` with a zero-width space after each `/`, `.`, `_`, `,` and in every run of 16
    letters or digits, where a wrapping table column may break a long name or hash."""
    text = re.sub(r"([/._,])(?=\S)", "\\1\u200b", text)
    return re.sub(r"([0-9A-Za-z]{16})(?=[0-9A-Za-z])", "\\1\u200b", text)


@dataclass
class _Writer:
    """Turns markdown-it's syntax tree into typst code, block by block."""
    base: str
    title: str = ""
    line: int = 0  # the line of the block being written, for UnsupportedMarkdown
    wrap_cells: bool = False

    def blocks(self, nodes) -> str:
        return "\n\n".join(b for b in (self.block(n) for n in nodes) if b)

    def block(self, node) -> str:
        if node.map:
            self.line = node.map[0] + 1
        method: Callable | None = getattr(self, "_" + node.type, None)
        if method is None or node.type in _INLINE_ONLY:
            raise UnsupportedMarkdown(f"line {self.line}: {node.type.replace('_', ' ')} "
                                      "is not typeset (presk/explain/pdf.py)")
        return method(node)

    # -- blocks --------------------------------------------------------------------------

    def _heading(self, node) -> str:
        text = self.inline(node.children[0])
        if not self.title:
            self.title = _plain(node)
        return f"#heading(level: {int(node.tag[1:])})[{text}]"

    def _paragraph(self, node) -> str:
        inline = node.children[0]
        if len(inline.children) == 1 and inline.children[0].type == "image":
            return self._figure(inline.children[0])
        return self.inline(inline)

    def _fence(self, node) -> str:
        text = node.content.rstrip("\n")
        size, columns = code_size(max((len(line) for line in text.split("\n")), default=0))
        raw = f"#raw(block: true, {string(wrap_code(text, columns))})"
        if size == CODE_SIZES[0]:
            return raw
        return f"#[#show raw: set text(size: {size}pt)\n{raw}]"  # the show rule's own size

    _code_block = _fence

    def _html_block(self, node) -> str:
        """A comment is for the markdown's reader (`<!-- written by presk explain -->`),
        not for the page; any other HTML is refused."""
        if not _COMMENT.fullmatch(node.content.strip()):
            raise UnsupportedMarkdown(f"line {self.line}: html block is not typeset "
                                      "(presk/explain/pdf.py)")
        return ""

    def _hr(self, node) -> str:
        return "#line(length: 100%, stroke: 0.4pt + luma(170))"

    def _bullet_list(self, node) -> str:
        return f"#list(tight: {_tight(node)}, {self._items(node)})"

    def _ordered_list(self, node) -> str:
        start = int(node.attrs.get("start", 1))
        return f"#enum(tight: {_tight(node)}, start: {start}, {self._items(node)})"

    def _items(self, node) -> str:
        return ", ".join(f"[{self.blocks(item.children)}]" for item in node.children)

    def _table(self, node) -> str:
        rows = [tr for part in node.children for tr in part.children]
        head = len(node.children[0].children) if node.children[0].type == "thead" else 0
        columns = max(len(tr.children) for tr in rows)
        lengths = [max((len(_plain(tr.children[c])) for tr in rows
                        if c < len(tr.children)), default=1) for c in range(columns)]
        align = [_align(rows[0].children[c]) if c < len(rows[0].children) else "left"
                 for c in range(columns)]
        width = sum(lengths) + 3 * columns
        size = next((pt for limit, pt in TABLE_SIZES if width <= limit), None)
        landscape = size is None and columns >= LANDSCAPE_MIN_COLUMNS
        if landscape:
            size, self.wrap_cells = TABLE_SIZES[-1][1], width > LANDSCAPE_WIDTH
        elif size is None:
            size, self.wrap_cells = WRAP_SIZE, True
        spec = ", ".join("auto" if not self.wrap_cells or n <= SHORT_COLUMN else
                         f"{min(n, WRAP_CAP)}fr" for n in lengths)
        cells = [self._row(tr, columns, header=i < head) for i, tr in enumerate(rows)]
        self.wrap_cells = False
        header = f"table.header({', '.join(cells[:head])}), " if head else ""
        table = (f"#text(size: {size}pt)[#table(columns: ({spec},), "
                 f"align: ({', '.join(align)},), {header}{', '.join(cells[head:])})]")
        return f"#page(flipped: true)[{table}]" if landscape else table

    def _row(self, tr, columns: int, header: bool) -> str:
        cells = [self.inline(td.children[0]) if td.children else "" for td in tr.children]
        cells += [""] * (columns - len(cells))
        return ", ".join(f"[#strong[{c}]]" if header else f"[{c}]" for c in cells)

    def _figure(self, image) -> str:
        path = self._image_path(image)
        alt = string(_plain(image))
        return f"#align(center, image({string(path)}, {_image_size(path)}, alt: {alt}))"

    def _image_path(self, image) -> str:
        src = image.attrs["src"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", src, re.I):
            raise UnsupportedMarkdown(f"line {self.line}: the image {src} is not a file")
        path = os.path.normpath(os.path.join(self.base, src))
        if not os.path.isfile(path):
            raise PdfError(f"line {self.line}: no image file {path}")
        return path

    # -- inline --------------------------------------------------------------------------

    def inline(self, node) -> str:
        return "".join(self._span(n) for n in node.children)

    def _span(self, node) -> str:
        method = _SPANS.get(node.type)
        if method is None:
            raise UnsupportedMarkdown(f"line {self.line}: {node.type.replace('_', ' ')} "
                                      f"({node.content!r}) is not typeset "
                                      "(presk/explain/pdf.py)")
        return method(self, node)

    def _text(self, node) -> str:
        text = break_points(node.content) if self.wrap_cells else node.content
        return f"#{string(text)}"

    def _code_inline(self, node) -> str:
        text = break_points(node.content) if self.wrap_cells else node.content
        return f"#raw({string(text)})"

    def _em(self, node) -> str:
        return f"#emph[{self.inline(node)}]"

    def _strong(self, node) -> str:
        return f"#strong[{self.inline(node)}]"

    def _link(self, node) -> str:
        return f"#link({string(node.attrs['href'])})[{self.inline(node)}]"

    def _image(self, node) -> str:
        path = self._image_path(node)
        return f"#box(image({string(path)}, height: 1.2em, alt: {string(_plain(node))}))"

    def _softbreak(self, node) -> str:
        return '#" "'

    def _hardbreak(self, node) -> str:
        return "#linebreak()"


_SPANS = {name: getattr(_Writer, "_" + name) for name in
          ("text", "code_inline", "em", "strong", "link", "image", "softbreak", "hardbreak")}
_INLINE_ONLY = set(_SPANS)


_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _plain(node) -> str:
    """The characters a node shows (an image: its alt text)."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain(c) for c in node.children)


def _tight(node) -> str:
    return "true" if all(p.hidden for item in node.children for p in item.children
                         if p.type == "paragraph") else "false"


def _align(cell) -> str:
    style = (cell.attrs or {}).get("style", "")
    return {"text-align:right": "right", "text-align:center": "center"}.get(style, "left")


def _image_size(path: str) -> str:
    """Full text width, unless that would make the picture taller than PAGE_HEIGHT_IN:
    then that height (a PNG's size is in its header; another image: the text width)."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return "width: 100%"
    w, h = struct.unpack(">II", head[16:24])
    text_width_in = (21.0 - 4.0) / 2.54
    return "width: 100%" if h * text_width_in <= w * PAGE_HEIGHT_IN else \
        f"height: {PAGE_HEIGHT_IN}in"


def main(argv: list[str] | None = None) -> int:
    """`python -m presk.explain.pdf DOC.md OUT.pdf` (what `make explain-pdf` runs): one
    line on success, one line and exit 2 on a missing file, exit 1 on what typst or this
    module refuses."""
    import sys
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m presk.explain.pdf DOC.md OUT.pdf", file=sys.stderr)
        return 2
    source, out = args
    if not os.path.isfile(source):
        print(f"error: no markdown file {source} (`make explain` writes the tutorial's)",
              file=sys.stderr)
        return 2
    try:
        write_pdf(source, out)
    except (UnsupportedMarkdown, PdfError) as e:
        print(f"error: {source}: {e}", file=sys.stderr)
        return 1
    with open(out, "rb") as f:
        pages = len(page_sizes(f.read()))
    print(f"wrote {out}: {pages} pages")
    return 0


def page_sizes(data: bytes) -> list[tuple[float, float]]:
    """Each page's width and height in points, from a PDF typst wrote (its page
    dictionaries are not compressed)."""
    boxes = re.findall(rb"/Type\s*/Page\b(?!s).*?/MediaBox\s*\[([^\]]*)\]", data, re.S)
    return [(float(b.split()[2]), float(b.split()[3])) for b in boxes]


if __name__ == "__main__":
    raise SystemExit(main())
