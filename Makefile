# `make demo` and `make test` each set up .venv on a fresh machine, then run. The demo ends
# by training the tutorial into runs/tutorial (removed first, so that it runs again).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test test-fast fuzz unit lit setup golden golden-bits clean explain explain-pdf

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/presk check --summary tutorial/07_train.psk
	$(BIN)/presk dump tutorial/07_train.psk --stage core --entry loss
	$(BIN)/presk run tutorial/07_train.psk --entry loss --dim B=4 --engine mpfr
	$(BIN)/presk run tutorial/07_train.psk --entry loss --dim B=4 --time \
	  --realize @test/fixtures/realization_mixed.json
	$(BIN)/presk run tutorial/07_train.psk --entry loss --dim B=4 --grad --time
	rm -rf runs/tutorial
	$(BIN)/presk train tutorial/07_train.psk --out runs/tutorial

# pytest on both cores (pytest-xdist, JOBS=0: one process): each test file runs whole, in
# order, on one worker (--dist loadfile), so a file's module fixtures and caches are built
# once and test/fuzz's last test still sees the counts of the others. Files are handed out
# in the order collected (--no-loadscope-reorder), the heavy ones first (test/conftest.py).
JOBS    ?= 2
PYTEST  := $(BIN)/pytest -q -n $(JOBS) --dist loadfile --no-loadscope-reorder

test: $(STAMP)
	$(PYTEST) test/unit test/e2e test/fuzz
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/lit -sv test/filecheck

# The fuzzer's long run (test/fuzz, over 10 000 cases, random seeds): the counts per input
# kind and outcome are printed at the end and written to fuzz-report.json.
fuzz: $(STAMP)
	PRESK_FUZZ_SCALE=$${PRESK_FUZZ_SCALE:-40} PRESK_FUZZ_REPORT=fuzz-report.json \
	  $(BIN)/pytest -q -s -p no:cacheprovider test/fuzz

# Everything but the tests marked `slow` (pytest -m slow lists them), and the lit tests.
test-fast: $(STAMP)
	PRESK_FUZZ_SCALE=$${PRESK_FUZZ_SCALE:-0.5} $(PYTEST) -m "not slow" test/unit test/e2e test/fuzz
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/lit -sv test/filecheck

# Golden files: regenerate them with the commands whose output they hold; tests compare.
golden: $(STAMP)
	mkdir -p test/golden
	$(BIN)/presk dump tutorial/07_train.psk --stage core --entry loss > test/golden/core_loss.txt.tmp \
	  || { rm -f test/golden/core_loss.txt.tmp; exit 1; }
	mv test/golden/core_loss.txt.tmp test/golden/core_loss.txt

# The bits every engine gives on the pinned cases (test/e2e/golden_bits.py says which),
# on the weights and inputs already in the file (--redraw: new ones). Only for an
# intended change of bits; test/e2e/test_golden_bits.py compares.
golden-bits: $(STAMP)
	$(BIN)/python test/e2e/golden_bits.py

# The tutorial's `presk explain` document (docs/explain.md says how to read it), with the
# frozen profile so that it is the same on every machine; test/unit/test_explain.py
# regenerates it and fails on any difference.
explain: $(STAMP)
	$(BIN)/presk explain tutorial/07_train.psk --entry loss --dim B=4 --budget 1e-3 \
	  --profile test/fixtures/profile-frozen.json --threads 2 --target native,c,pytorch \
	  -o docs/explain

# The tutorial's document (docs/explain/explain.md, which `make explain` writes and a test
# holds current) typeset by typst, pictures included, into docs/explain/explain.pdf. The
# PDF's bytes are deterministic for one typst version, not across versions, so it is not
# kept in git (.gitignore) and no golden test compares it; test_explain_pdf.py checks
# that its pages render and hold the pictures.
explain-pdf: $(STAMP)
	$(BIN)/python -m presk.explain.pdf docs/explain/explain.md docs/explain/explain.pdf

clean:
	rm -rf $(VENV) build *.egg-info

