# The two commands: `make demo` and `make test`. Both create or reuse .venv with pinned dependencies.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO := out/demo

.PHONY: venv demo test clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

demo: $(STAMP)
	mkdir -p $(DEMO)
	$(VENV)/bin/psyattrs data synth --out $(DEMO)/corpus.csv --dialogues 300 --seed 7
	$(VENV)/bin/psyattrs data validate $(DEMO)/corpus.csv --report $(DEMO)/set_aside.jsonl
	$(VENV)/bin/psyattrs labels resolve $(DEMO)/corpus.csv --out $(DEMO)/resolved.csv --method opela --check
	$(VENV)/bin/psyattrs data stats $(DEMO)/resolved.csv --json $(DEMO)/stats.json

clean:
	rm -rf $(VENV) out
