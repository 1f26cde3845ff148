"""presk/explain/pdf.py: the document's markdown typeset by typst. Hostile text comes out
exactly as written (typst itself reads it back), every construct of the sample document
(test/fixtures/explain-sample) is typeset, an unknown one fails loudly, tables fit, code
wraps, the PDF is deterministic, its pages render (pdftoppm) and hold the pictures."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import typst

from programs import ROOT
from presk.explain import figures, pdf


SAMPLE = ROOT / "test" / "fixtures" / "explain-sample"
HOSTILE = [
    '*strong* _emph_ `raw` **x**',
    '$x^2$ #let a = 1 #set text(red)',
    '@ref <label> // a comment /* and another */',
    'a\\b \\ "double" \'single\' \\u{41} \\n',
    '~ -- --- ... = + - / [x] {y} (z) ; :',
    'ℝ[batch: B, model: 4] ‖∂L/∂v‖₁ θ.blocks γ Σ 2⁻⁵³ → ≤ ×',
    '#"x" + ")" #raw("y") ]) [ #{',
    'tab\there, control \x01 and \x7f, ZWSP\u200b',
]


def evaluate(expr: str):
    return json.loads(typst.eval(b"", expr, ignore_system_fonts=True))


def shown(content) -> str:
    """The characters of a typst content value as typst.query gives it as JSON."""
    if isinstance(content, str):
        return content
    if content.get("func") in ("text", "raw"):
        return content["text"]
    if content.get("func") == "space":
        return " "
    parts = content.get("children") or [content.get("body", "")]
    return "".join(shown(c) for c in parts)


def headings(source: str) -> list[str]:
    found = json.loads(typst.query(source.encode(), "heading", root="/",
                                   ignore_system_fonts=True))
    return [shown(h["body"]) for h in found]


def md_escape(text: str) -> str:
    """Every ASCII punctuation character escaped, as CommonMark allows."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_string_literal_holds_the_text_exactly(text):
    assert evaluate(pdf.string(text)) == text


def test_hostile_text_in_headings_comes_out_as_written():
    lines = [t.replace("\t", " ").replace("\x01", "").replace("\x7f", "") for t in HOSTILE]
    md = "\n\n".join(f"# {md_escape(t)}" for t in lines)
    assert headings(pdf.to_typst(md, str(SAMPLE))) == lines
    # and inside inline code, emphasis and strong, where markdown does not escape
    md = "# `@x <y> $z$ #w \\ \"q\"` *a / b* **c // d**"
    assert headings(pdf.to_typst(md, str(SAMPLE))) == ['@x <y> $z$ #w \\ "q" a / b c // d']


def test_a_listing_is_set_smaller_before_it_wraps():
    assert pdf.code_size(80) == (7.5, 101)  # 101 · 0.62 · 7.5 pt ≤ 473.9 pt, the text width
    size, columns = pdf.code_size(115)
    assert size < 7.5 and columns >= 115
    assert pdf.code_size(400) == (6.0, 127)
    for longest, wraps in ((100, False), (120, False), (127, False), (128, True)):
        src = pdf.to_typst("```\n" + "y" * longest + "\n```", str(SAMPLE))
        assert (pdf.CONTINUATION in src) == wraps, longest
        assert ("#show raw: set text(size:" in src) == (longest > 101)


def test_code_is_wrapped_at_the_width_with_every_character_kept():
    words = " ".join(f"w{i:03d}" * (1 + i % 7) for i in range(200))
    long_token = "x" * 333
    for line in (words, long_token, "  " + words, "short"):
        out = pdf.wrap_code(line, 60).split("\n")
        assert all(len(o) <= 60 for o in out)
        assert all(o.startswith(pdf.CONTINUATION) for o in out[1:])
        pieces = [out[0]] + [o[len(pdf.CONTINUATION):] for o in out[1:]]
        if " " in line.strip():  # broken at spaces: the same words in the same order
            assert " ".join(pieces).split() == line.split()
        else:
            assert "".join(pieces) == line
    assert pdf.wrap_code("a\n\nb", 60) == "a\n\nb"


def typeset_sample(tmp_path):
    d = tmp_path / "doc"
    shutil.copytree(SAMPLE, d)
    (d / "pictures").mkdir()
    figures.sensitivities([figures.SiteSensitivity("loss/%6", 1.0, 2e-7),
                           figures.SiteSensitivity("RMSNorm.apply/%10", 2.4, 1.3e-7)],
                          2.1e-3, str(d / "pictures" / "sensitivities.png"))
    pdf.write_pdf(str(d / "explain.md"), str(d / "explain.pdf"))
    return d, (d / "explain.pdf").read_bytes()


def test_the_sample_typesets_deterministically_with_its_picture(tmp_path):
    d, data = typeset_sample(tmp_path)
    assert data.startswith(b"%PDF-")
    again = pdf.compile_typst(pdf.to_typst((d / "explain.md").read_text(), str(d)))
    assert again == data  # no date, no system font: the same bytes
    elsewhere = tmp_path / "elsewhere" / "doc"
    shutil.copytree(d, elsewhere)
    pdf.write_pdf(str(elsewhere / "explain.md"), str(elsewhere / "explain.pdf"))
    assert (elsewhere / "explain.pdf").read_bytes() == data  # nor the folder it is in
    assert len(re.findall(rb"/Subtype\s*/Image", data)) >= 1
    sizes = pdf.page_sizes(data)
    assert len(sizes) > 1
    assert any(w > h for w, h in sizes) and any(w < h for w, h in sizes)  # one landscape


def test_the_sample_pages_render_and_hold_its_text(tmp_path):
    if not shutil.which("pdftoppm"):
        pytest.skip("pdftoppm (poppler-utils) is not installed: the pages are not rendered")
    d, data = typeset_sample(tmp_path)
    subprocess.run(["pdftoppm", "-r", "30", "-png", str(d / "explain.pdf"),
                    str(tmp_path / "page")], check=True, capture_output=True)
    assert len(list(tmp_path.glob("page-*.png"))) == len(pdf.page_sizes(data)) > 1
    if shutil.which("pdfimages"):
        listed = subprocess.run(["pdfimages", "-list", str(d / "explain.pdf")],
                                check=True, capture_output=True, text=True).stdout
        assert re.search(r"^\s*\d+\s+0\s+image\s+700\s", listed, re.M)  # the 700 px picture
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", "-layout", str(d / "explain.pdf"), "-"],
                              check=True, capture_output=True, text=True).stdout
        text = text.replace("\u200b", "")
        for s in ("$DOC, #set, @ref,", "<label>, // not a comment, /* nor this */, a\\b,",
                  '"quotes", ~tilde, -- and --- dashes, 2 * 3 * 4, x_1_2, [brackets]',
                  "0a4ed24b1b666e13f0d8e7a2c4b9a1e0c3d2f1a0b9c8d7e6f5a4b3c2d1e0f9a8",
                  "mean((t.Tower.apply(θ, x) - y)^2)",
                  pdf.CONTINUATION + "listing, so that it wraps",
                  "ℝ[batch: B, model: 4]", "at operation 12 of 39"):
            assert s in text, s
        assert overflowing(d / "explain.pdf") == []  # tables and listings fit their pages


def overflowing(path) -> list[str]:
    """The words pdftotext finds past the right margin (2 cm) of their page."""
    html = subprocess.run(["pdftotext", "-bbox", str(path), "-"], check=True,
                          capture_output=True, text=True).stdout
    out = []
    for n, page in enumerate(html.split("<page ")[1:], 1):
        edge = float(re.search(r'width="([\d.]+)"', page).group(1)) - 56.69 + 1
        out += [f"page {n}: {w}" for x, w in
                re.findall(r'xMax="([\d.]+)"[^>]*>([^<]*)<', page) if float(x) > edge]
    return out


def table(columns: int, width: int) -> str:
    head = "| " + " | ".join(f"c{i}" for i in range(columns)) + " |"
    rule = "|" + "---|" * columns
    row = "| " + " | ".join("a/b." * (width // 4) for _ in range(columns)) + " |"
    return "\n".join([head, rule, row])


@pytest.mark.parametrize("columns,width,size,landscape,wraps", [
    (3, 20, 9.0, False, False),    # 3·(20 + 3) = 69 characters
    (4, 28, 7.5, False, False),    # 124
    (5, 28, 6.5, False, False),    # 155
    (6, 32, 7.5, False, True),     # 210, 6 columns: its long columns wrap
    (8, 24, 6.5, True, False),     # 216, 8 columns: a landscape page
    (8, 40, 6.5, True, True),      # 344: landscape, and the columns wrap
])
def test_a_table_is_set_to_fit_the_page(columns, width, size, landscape, wraps):
    src = pdf.to_typst(table(columns, width), str(SAMPLE))
    assert f"#text(size: {size}pt)[#table(" in src
    assert ("#page(flipped: true)" in src) == landscape
    spec = src.split("columns: (")[1].split(")")[0]
    assert ("fr" in spec) == wraps
    assert ("\u200b" in src) == wraps
    pdf.compile_typst(src)


def test_table_alignment_and_header():
    src = pdf.to_typst("| a | b | c |\n|:--|--:|:-:|\n| 1 | 2 | 3 |", str(SAMPLE))
    assert "align: (left, right, center,)" in src
    assert 'table.header([#strong[#"a"]], [#strong[#"b"]], [#strong[#"c"]])' in src


@pytest.mark.parametrize("md,what", [
    ("> a quote", "line 1: blockquote is not typeset"),
    ("text\n\n<div>html</div>", "line 3: html block is not typeset"),
    ("a <b>bold</b> word", "line 1: html inline ('<b>') is not typeset"),
    ("A site is named <function>/%<n>.", "line 1: html inline ('<function>')"),
    ("# t\n\n![x](https://example.org/x.png)", "line 3: the image https://"),
])
def test_what_is_not_typeset_fails_loudly(md, what):
    with pytest.raises(pdf.UnsupportedMarkdown, match=re.escape(what)):
        pdf.to_typst(md, str(SAMPLE))


def test_a_missing_picture_is_one_line(tmp_path):
    (tmp_path / "explain.md").write_text("# t\n\n![gone](pictures/gone.png)\n")
    with pytest.raises(pdf.PdfError, match=r"^line 3: no image file .*pictures/gone.png$"):
        pdf.write_pdf(str(tmp_path / "explain.md"), str(tmp_path / "explain.pdf"))
    assert not (tmp_path / "explain.pdf").exists()


def run_main(*args: str) -> subprocess.CompletedProcess:
    import sys
    return subprocess.run([sys.executable, "-m", "presk.explain.pdf", *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_main_says_one_line(tmp_path):
    d, _ = typeset_sample(tmp_path)
    ok = run_main(str(d / "explain.md"), str(tmp_path / "out.pdf"))
    pages = len(pdf.page_sizes((tmp_path / "out.pdf").read_bytes()))
    assert (ok.returncode, ok.stdout, ok.stderr) == (
        0, f"wrote {tmp_path / 'out.pdf'}: {pages} pages\n", "")
    gone = run_main(str(tmp_path / "none.md"), str(tmp_path / "x.pdf"))
    assert gone.returncode == 2 and gone.stdout == ""
    assert gone.stderr.count("\n") == 1 and "no markdown file" in gone.stderr
    (tmp_path / "bad.md").write_text("ok\n\n> a quote\n")
    bad = run_main(str(tmp_path / "bad.md"), str(tmp_path / "x.pdf"))
    assert (bad.returncode, bad.stderr) == (
        1, f"error: {tmp_path / 'bad.md'}: line 3: blockquote is not typeset "
           "(presk/explain/pdf.py)\n")
    assert not (tmp_path / "x.pdf").exists()


TUTORIAL_DOC = ROOT / "docs" / "explain" / "explain.md"


def test_the_tutorials_document_typesets_as_make_explain_pdf_does(tmp_path):
    """`make explain-pdf`'s recipe, into a temporary file (a test writes nothing in docs/)."""
    if not TUTORIAL_DOC.exists():
        pytest.skip("docs/explain/explain.md is not there yet (`make explain` writes it)")
    out = tmp_path / "explain.pdf"
    done = run_main(str(TUTORIAL_DOC), str(out))
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    pages = pdf.page_sizes(data)
    assert len(pages) > 1
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", TUTORIAL_DOC.read_text())
    assert len(re.findall(rb"/Subtype\s*/Image", data)) >= len(set(pictures))
    if not shutil.which("pdftoppm"):
        pytest.skip("pdftoppm (poppler-utils) is not installed: the pages are not rendered")
    subprocess.run(["pdftoppm", "-r", "20", "-png", str(out), str(tmp_path / "page")],
                   check=True, capture_output=True)
    assert len(list(tmp_path.glob("page-*.png"))) == len(pages)
    if shutil.which("pdftotext"):
        assert overflowing(out) == []


def test_an_html_comment_is_left_out():
    src = pdf.to_typst("<!-- written by presk explain: do not edit -->\n\n# t\n", str(SAMPLE))
    assert "written by" not in src and headings(src) == ["t"]
