# The two commands of the README: `make run` and `make test`. Both set up .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# The Procfile's mcp process (uvicorn, /mcp) listens on the next port. honcho hands every process a
# PORT of its own (8000, 8100, 8200, ...), so the mcp line reads MCP_PORT instead.
MCP_PORT ?= $(shell expr $(PORT) + 1)
# Web, cluster and the webhooks line write their metrics here; /metrics adds them up (docs/metrics.md).
METRICS_DIR ?= $(CURDIR)/var/metrics
# Django's signing key, shared by web, cluster and commands; settings read it when SECRET_KEY is unset.
SECRET_KEY_FILE ?= var/secret_key

.PHONY: chromium consent-rules run test check clean secret-key model

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Written once, never overwritten (O_EXCL), readable by its owner only.
$(SECRET_KEY_FILE):
	mkdir -p $(dir $@)
	$(PYTHON) -c 'import os, secrets, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600); os.write(fd, secrets.token_urlsafe(48).encode() + b"\n")' $@

secret-key: $(SECRET_KEY_FILE)

$(VENV)/.installed: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.installed $(SECRET_KEY_FILE) chromium consent-rules
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	rm -rf $(METRICS_DIR) && mkdir -p $(METRICS_DIR)
	$(BIN)/python manage.py setup_demo --port $(PORT)
	@echo "  MCP endpoint : http://127.0.0.1:$(MCP_PORT)/mcp  (client set-up: docs/mcp.md)"
	PATH=$(CURDIR)/$(BIN):$$PATH PROMETHEUS_MULTIPROC_DIR=$(METRICS_DIR) MCP_PORT=$(MCP_PORT) \
		$(BIN)/honcho start --port $(PORT) --procfile Procfile

# Most tests wait on processes and sockets, not the CPU: two pytest workers, each taking whole
# modules (a module's deployment is started once), halve the suite's time on two cores.
TEST_PROCESSES ?= 2
test: $(VENV)/.installed $(SECRET_KEY_FILE) consent-rules
	$(BIN)/pytest -n $(TEST_PROCESSES) --dist loadfile

check: $(VENV)/.installed $(SECRET_KEY_FILE)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/lint-imports

# The page-type and block models (fetch/html/models/page_type.json, block_main.json), rebuilt from the
# labelled pages in the bench-data directory (bench/train.py and bench/train_blocks.py say what they
# learn from and print how it was checked). Their training library is a development requirement,
# never the service's.
BENCH_DATA ?= ../shared/bench-data
model: $(VENV)/.installed
	$(BIN)/python -m bench.train --data $(BENCH_DATA)
	$(BIN)/python -m bench.train_blocks --data $(BENCH_DATA)

clean:
	rm -rf $(VENV) var staticfiles db.sqlite3*

# Debian's headless shell for render: true (chromium-headless-shell: Chromium's headless-only
# build, leaner than the full browser; Playwright cannot download its own browser here). Installed
# when missing and we are root; failing that Debian's full chromium renders if it is installed,
# otherwise rendering answers 415 and everything else works.
HEADLESS_SHELL := /usr/lib/chromium/chromium-headless-shell
chromium:
	@[ -x $(HEADLESS_SHELL) ] || { [ "$$(id -u)" = 0 ] && \
		apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium-headless-shell >/dev/null 2>&1 && \
		echo "installed Debian's chromium-headless-shell for render: true"; } || \
		{ [ -x /usr/bin/chromium ] && echo "render: true uses /usr/bin/chromium (no chromium-headless-shell)"; } || \
		echo "no Chromium: render: true answers 415 (apt-get install chromium-headless-shell enables it)"

# DuckDuckGo's consent rules (@duckduckgo/autoconsent), which rendered pages answer banners with,
# installed as package-lock.json pins them (docs/dependencies.md says how they are updated).
# Without npm, consent is not answered (manage.py check warns) and everything else works.
CONSENT_RULES := node_modules/@duckduckgo/autoconsent/package.json
$(CONSENT_RULES): package.json package-lock.json
	@if command -v npm >/dev/null; then npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "no npm: rendered pages answer no consent banner (install Node.js and npm, then make)"; fi

consent-rules: $(CONSENT_RULES)
