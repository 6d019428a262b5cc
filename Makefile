# The two commands: `make demo` and `make test`. Both create or reuse .venv with pinned dependencies.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO := out/demo
# the demo's own registered model name; `register --owner make-demo` never moves an alias the demo did not set
DEMO_MODEL := psyattrs-make-demo
# LightGBM's OpenMP threads spin while waiting; on a busy 2-core machine that makes them ~5x slower
export OMP_WAIT_POLICY ?= PASSIVE
# PYTHONWARNINGS=ignore on the editable install: setuptools warns on every editable install of a
# renamed package folder (src/attrs -> psyattrs), a warning a user cannot act on
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec

.PHONY: venv demo test clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	PYTHONWARNINGS=ignore $(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

# the suite runs in one worker process per CPU (pytest-xdist), whole test files per worker so that a
# file's shared fixtures are built once; `make test TEST_WORKERS=0` runs it in this one process
TEST_WORKERS ?= auto

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

demo: $(STAMP)
	mkdir -p $(DEMO)
	$(VENV)/bin/psyattrs data synth --out $(DEMO)/corpus.csv --dialogues 100 --seed 7 --rare-boost 3
	$(VENV)/bin/psyattrs data validate $(DEMO)/corpus.csv --report $(DEMO)/set_aside.jsonl
	$(VENV)/bin/psyattrs labels resolve $(DEMO)/corpus.csv --out $(DEMO)/resolved.csv --method opela --check
	$(VENV)/bin/psyattrs data stats $(DEMO)/resolved.csv --json $(DEMO)/stats.json
	$(VENV)/bin/psyattrs train experiments/demo.yaml --set data.path=$(DEMO)/resolved.csv | tee $(DEMO)/train.txt
	$(VENV)/bin/psyattrs register $$(tail -n 1 $(DEMO)/train.txt) --name $(DEMO_MODEL) --alias champion --owner make-demo
	$(VENV)/bin/psyattrs predict --model models:/$(DEMO_MODEL)@champion --text "안녕하세요 처음 뵙겠습니다~" --text "오늘 회사에서 너무 힘들었어요 ㅠㅠ" --text "헐 진짜요? 많이 속상하셨겠다"
	$(VENV)/bin/psyattrs predict --model models:/$(DEMO_MODEL)@champion --dialogue --text "오늘 회사에서 너무 힘들었어요 ㅠㅠ" --text "헐 진짜요? 많이 속상하셨겠다" --text "네 그래도 얘기하니까 좀 나아요 ㅎㅎ"
	@for f in ../shared/data/personaldialog_train_sample.jsonl ../shared/data/personaldialog_test_sample.jsonl; do \
	  if [ -f "$$f" ]; then $(VENV)/bin/psyattrs predict --model models:/$(DEMO_MODEL)@champion --input "$$f"; \
	  else echo "skipped: $$f not found (the PersonalDialog samples are not shipped with psyattrs)"; fi; done

clean:
	rm -rf $(VENV) out
