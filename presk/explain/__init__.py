"""The explain document's pictures (figures.py, matplotlib) and its PDF (pdf.py, typst):
pure functions of plain data and of the document's Markdown. The document itself, which
runs presk's commands, is the `explain` package of the command line (cli/explain/)."""
