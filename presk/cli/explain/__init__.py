"""`presk explain`'s document: each section runs the commands whose output it shows (this
package sits in the command-line layer for that reason); the pictures and the PDF are
drawn below it, by presk/explain/ (figures.py, pdf.py: matplotlib and typst, pure)."""
