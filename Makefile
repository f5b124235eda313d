# Two commands for a newcomer: `make plan` (the offline plan of the sample fleet) and `make test`.
# Both create .venv from the requirements files on first use (and again when those files change).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: plan test lint validate schema benchmark clean

$(STAMP): requirements.txt requirements-dev.txt policy/requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

plan: $(STAMP)
	$(PY) -m fleet plan

validate: $(STAMP)
	$(PY) -m fleet validate

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m fleet schema --check
	$(PY) -m pytest -q -n 2

schema: $(STAMP)
	$(PY) -m fleet schema

benchmark: $(STAMP)
	$(PY) -m benchmarks.plan_speed

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
