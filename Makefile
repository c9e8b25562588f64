# `make run` serves the service, `make test` runs the whole suite, `make bench` measures it against the
# floor of the stack (see bench/run.py); each installs what it needs first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
# Empty: gunicorn.conf.py decides (WEB_CONCURRENCY, else 2 x CPUs + 1).
WORKERS ?=
FLASK  := $(BIN)/flask --app app

.PHONY: install run dev test lint bench upgrade clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

upgrade: install
	$(FLASK) db upgrade

run: upgrade
	@$(FLASK) keys bootstrap --base-url http://$(HOST):$(PORT)
	HOST=$(HOST) PORT=$(PORT) $(if $(WORKERS),WEB_CONCURRENCY=$(WORKERS)) $(BIN)/gunicorn -c gunicorn.conf.py app:app

dev: upgrade
	$(FLASK) run --debug --host $(HOST) --port $(PORT)

test: install lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

# The floor's only extra, orjson, is pinned in requirements.txt (make test checks the floor too);
# wrk is a system package. Settings: BENCH_SECONDS, BENCH_ROUNDS, BENCH_WARMUP, BENCH_SKIP_1M=1 (no 1M part),
# BENCH_QUICK=1 (a first look in about two minutes).
bench: install
	@command -v wrk >/dev/null 2>&1 || { echo "wrk is missing: install it with apt-get install wrk" >&2; exit 1; }
	$(BIN)/python bench/run.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/tail.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
