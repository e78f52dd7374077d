# The two commands of the README: `make run` and `make test`. Both set up .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# Web and cluster write their metrics here and /metrics adds them up (docs/metrics.md).
METRICS_DIR ?= $(CURDIR)/var/metrics

.PHONY: run test check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	rm -rf $(METRICS_DIR) && mkdir -p $(METRICS_DIR)
	$(BIN)/python manage.py setup_demo --port $(PORT)
	PATH=$(CURDIR)/$(BIN):$$PATH PROMETHEUS_MULTIPROC_DIR=$(METRICS_DIR) \
		$(BIN)/honcho start --port $(PORT) --procfile Procfile

test: $(VENV)/.installed
	$(BIN)/pytest

check: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/python manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) var staticfiles db.sqlite3*
