# omnireel — developer entry points. Quick start: `make demo`, then `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
# Independent targets run in parallel: the environments build side by side (each waits only for uv and for the venvs
# it extends: .venv -> .venv-emulator -> .venv-dev), and `make lint` runs validate and checkov together. `make -j1 ...`
# runs one thing at a time.
MAKEFLAGS += --jobs=4
# Bytecode is cached: every command here runs without PYTHONDONTWRITEBYTECODE, which some shells, containers and CI
# images set. With it each Python process compiled from source every module of this checkout it imported (the venvs'
# packages are compiled at install): the stack, the CLI, the emulators, and pytest's assertion rewriting of every test
# module in every worker. Measured on 2 cores (docs/benchmarks.md): make test 47 CPU-s and about 25 s less. The caches
# are __pycache__ folders, ignored by git and removed by `make clean`. (The local Lambda workers still write none, as
# on Lambda's read-only file system: lambda_runner sets the variable for them. They read those the tests wrote.)
unexport PYTHONDONTWRITEBYTECODE

PYTHON_BOOT := $(shell scripts/find-python)
VENV        := .venv
PY          := $(VENV)/bin/python
SAM_VENV    := .venv-sam
SAM         := $(SAM_VENV)/bin/sam
STAMP       := $(VENV)/.installed
SAM_STAMP   := $(SAM_VENV)/.installed
CHECKOV_VENV  := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
AWS_VENV    := .venv-aws
AWS_STAMP   := $(AWS_VENV)/.installed
NODE_STAMP  := node_modules/.installed

# Every environment is created and filled by uv from its lock in requirements/lock/ (`make lock` writes them from the
# hand-edited requirements/*.txt: exact versions and every file's sha256). Installs are --require-hashes --no-deps:
# exactly the lock, nothing resolved at install time. uv itself lives in .venv-uv, installed by the bootstrap Python's
# pip from its own hash-pinned lock. uv never downloads a Python: every venv uses the one scripts/find-python found.
# .venv's and .venv-emulator's bytecode is compiled at install, as pip did: without it the first test run's parallel
# stack starts each compiled moto, botocore... from source at once, and under load one ran past the tests' 120 s start
# bound. The other venvs (one process each at a time) write theirs on first import: only the modules used.
UV_VENV     := .venv-uv
UV          := $(UV_VENV)/bin/uv
UV_STAMP    := $(UV_VENV)/.installed
LOCK        := requirements/lock
export UV_PYTHON_DOWNLOADS := never
UV_INSTALL  := $(UV) pip install --quiet --require-hashes --no-deps
UV_SYNC     := $(UV) pip sync --quiet --require-hashes

.PHONY: help venv emulator-venv dev-venv sam-venv checkov-venv aws-cli uv envs lock checkov lint test test-unit test-integration test-e2e test-scale test-durations demo build validate clean destroy bench smoke relay-image preflight deploy docs coverage

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(UV_STAMP): $(LOCK)/uv.txt
	@test -n "$(PYTHON_BOOT)" || { echo "no Python >= 3.12 found" >&2; exit 1; }
	@echo "==> [$(UV_VENV)] installing uv (the installer of every venv; pinned with its hashes: $(LOCK)/uv.txt)"
	@test -x $(UV_VENV)/bin/python || $(PYTHON_BOOT) -m venv $(UV_VENV)
	@# Quiet pip's notes about local mirrors that do not exist on every machine.
	@$(UV_VENV)/bin/python -m pip --disable-pip-version-check -q install --require-hashes -r $(LOCK)/uv.txt 2>&1 \
		| { grep -v "is ignored: it is neither a file nor a directory" || true; }
	@touch $@

uv: $(UV_STAMP) ## install the pinned uv into .venv-uv (every other venv is made with it)

lock: $(UV_STAMP) ## re-resolve requirements/lock/*.txt from requirements/*.txt (after editing a pin)
	@$(PYTHON_BOOT) scripts/lock_requirements.py $(UV)

$(STAMP): $(UV_STAMP) $(LOCK)/venv.txt pyproject.toml
	@test -n "$(PYTHON_BOOT)" || { echo "no Python >= 3.12 found" >&2; exit 1; }
	@echo "==> [.venv 1/3] creating $(VENV) with $(PYTHON_BOOT)"
	@test -x $(PY) || $(UV) venv --quiet --python $(PYTHON_BOOT) $(VENV)
	@echo "==> [.venv 2/3] installing the local stack, the layer and the relay into $(VENV) (uv: $(LOCK)/venv.txt)"
	@$(UV_SYNC) --compile-bytecode --python $(PY) $(LOCK)/venv.txt
	@echo "==> [.venv 3/3] installing the omnireel command (editable: $(VENV)/bin/omnireel runs this checkout)"
	@# setuptools (pinned in the lock) is the editable install's build backend, then removed: nothing imports it at
	@# run time (10 MB), and no isolated build environment is resolved.
	@# (This checkout itself has no hash: the one install outside --require-hashes, with --no-deps.)
	@$(UV) pip install --quiet --no-deps --python $(PY) --no-build-isolation -e .
	@$(UV) pip uninstall --quiet --python $(PY) setuptools
	@touch $@
	@echo "==> $(VENV) ready ($$(du -sm $(VENV) | cut -f1) MiB on disk)"

venv: $(STAMP) ## create .venv (Python 3.13): what running the stack needs, and the omnireel CLI

# .venv-emulator and .venv-dev EXTEND .venv instead of reinstalling it (scripts/extend-venv: a .pth file runs
# site.addsitedir() on the bases' site-packages). They have no pip: uv installs into them only what their lock adds.
EMU_VENV    := .venv-emulator
EMU_PY      := $(EMU_VENV)/bin/python
EMU_STAMP   := $(EMU_VENV)/.installed
DEV_VENV    := .venv-dev
DEV_PY      := $(DEV_VENV)/bin/python
DEV_STAMP   := $(DEV_VENV)/.installed

$(EMU_STAMP): $(STAMP) $(LOCK)/emulator.txt
	@echo "==> [$(EMU_VENV) 1/2] creating $(EMU_VENV) (extends $(VENV)): the container emulator's own environment"
	@scripts/extend-venv $(PYTHON_BOOT) $(EMU_VENV) $(VENV)
	@echo "==> [$(EMU_VENV) 2/2] installing PyAV (FFmpeg) and numpy into $(EMU_VENV): the emulator's H.264 MP4s, PNGs and PCM"
	@$(UV_INSTALL) --compile-bytecode --python $(EMU_PY) -r $(LOCK)/emulator.txt
	@touch $@
	@echo "==> $(EMU_VENV) ready ($$(du -sm $(EMU_VENV) | cut -f1) MiB on disk)"

emulator-venv: $(EMU_STAMP) ## create .venv-emulator (extends .venv): PyAV + numpy for the container emulator

$(DEV_STAMP): $(STAMP) $(EMU_STAMP) $(LOCK)/dev.txt
	@echo "==> [$(DEV_VENV) 1/2] creating $(DEV_VENV) (extends $(VENV) and $(EMU_VENV)): tests, lint, benches"
	@scripts/extend-venv $(PYTHON_BOOT) $(DEV_VENV) $(EMU_VENV) $(VENV)
	@echo "==> [$(DEV_VENV) 2/2] installing pytest, ruff, mypy, coverage and the test-only libraries into $(DEV_VENV)"
	@$(UV_INSTALL) --python $(DEV_PY) -r $(LOCK)/dev.txt
	@touch $@
	@echo "==> $(DEV_VENV) ready ($$(du -sm $(DEV_VENV) | cut -f1) MiB on disk)"

dev-venv: $(DEV_STAMP) ## create .venv-dev (extends .venv and .venv-emulator): pytest, ruff, mypy, coverage

# The tool venvs stand alone: each tool pins its own dependencies (its lock is resolved alone).
$(SAM_STAMP): $(UV_STAMP) $(LOCK)/sam.txt
	@echo "==> creating $(SAM_VENV) (SAM CLI pins its own boto3)"
	@test -x $(SAM_VENV)/bin/python || $(UV) venv --quiet --python $(PYTHON_BOOT) $(SAM_VENV)
	@$(UV_SYNC) --python $(SAM_VENV)/bin/python $(LOCK)/sam.txt
	@touch $@

sam-venv: $(SAM_STAMP) ## create .venv-sam with the pinned SAM CLI

$(CHECKOV_STAMP): $(UV_STAMP) $(LOCK)/checkov.txt
	@echo "==> creating $(CHECKOV_VENV) (checkov pins its own dependencies)"
	@test -x $(CHECKOV_VENV)/bin/python || $(UV) venv --quiet --python $(PYTHON_BOOT) $(CHECKOV_VENV)
	@$(UV_SYNC) --python $(CHECKOV_VENV)/bin/python $(LOCK)/checkov.txt
	@touch $@

checkov-venv: $(CHECKOV_STAMP) ## create .venv-checkov with the pinned checkov

$(AWS_STAMP): $(UV_STAMP) $(LOCK)/aws.txt
	@echo "==> creating $(AWS_VENV) (the AWS CLI for \`omnireel aws\`; it pins its own botocore)"
	@test -x $(AWS_VENV)/bin/python || $(UV) venv --quiet --python $(PYTHON_BOOT) $(AWS_VENV)
	@$(UV_SYNC) --python $(AWS_VENV)/bin/python $(LOCK)/aws.txt
	@touch $@

aws-cli: $(AWS_STAMP) ## create .venv-aws with the pinned AWS CLI (used by `omnireel aws ...`)

envs: $(DEV_STAMP) $(SAM_STAMP) $(CHECKOV_STAMP) $(AWS_STAMP) $(NODE_STAMP) ## every environment `make test` needs, built in parallel

# sam validate --lint and checkov run once per set of inputs (scripts/lint-once: skipped when the template, the state
# machine, the transform and the pins are exactly those of their last pass; a clean checkout always runs them;
# LINT_ONCE=0 forces them): ~25 CPU-s of every repeated `make test`.
checkov: $(STAMP) $(CHECKOV_STAMP) ## checkov on the SAM-transformed template (waivers live in resource Metadata)
	@echo "==> checkov (SAM-transformed template.yaml)"
	@scripts/lint-once checkov bash -c '$(PY) scripts/checkov_template.py .aws-sam/checkov/template.json >/dev/null \
		&& $(CHECKOV_VENV)/bin/checkov -f .aws-sam/checkov/template.json --framework cloudformation --skip-download \
		--compact --quiet -o cli'

$(NODE_STAMP): package.json package-lock.json
	@echo "==> installing asl-validator (npm ci)"
	@npm ci --silent --no-audit --no-fund
	@touch $@

validate: $(STAMP) $(SAM_STAMP) $(NODE_STAMP) ## sam validate --lint and ASL validation
	@echo "==> sam validate --lint"
	@scripts/lint-once sam-validate env AWS_DEFAULT_REGION=us-east-1 SAM_CLI_TELEMETRY=0 \
		$(SAM) validate --lint --template template.yaml
	@echo "==> asl-validator (statemachine/pipeline.asl.json with the template's substitutions)"
	@$(PY) -m omnireel_template .aws-sam/asl >/dev/null
	@npx --no-install asl-validator --json-path .aws-sam/asl/pipeline.asl.json

lint: $(DEV_STAMP) validate checkov ## ruff + mypy + sam validate --lint + ASL validation + checkov
	@echo "==> ruff"
	@$(DEV_VENV)/bin/ruff check .
	@$(DEV_VENV)/bin/ruff format --check . >/dev/null || { echo "ruff format: run '$(DEV_VENV)/bin/ruff format .'" >&2; exit 1; }
	@echo "==> mypy (layers/, functions/, relay/, client/: settings in pyproject.toml; the client again as Python 3.10)"
	@$(DEV_VENV)/bin/mypy
	@$(DEV_VENV)/bin/mypy --python-version 3.10 --cache-dir .mypy_cache/py310 client/omnireel_client

# Test files run in parallel (pytest-xdist, one file per worker at a time): every e2e worker starts its own local
# stack with its own home and free ports, so workers never share state. TEST_WORKERS=1 runs them one by one.
# --no-loadscope-reorder: files are handed out in collection order, which tests/conftest.py sorts longest first from
# the measured seconds in tests/durations.json (`make test-durations` refreshes them; xdist's default order is by
# number of tests, which left the long e2e files for the end). Every run writes its JUnit report to $(JUNIT_DIR)
# (xunit1: each test names its file), which `make test-durations` reads.
# Two workers more than the cores: the e2e files spend much of their time waiting on their stacks, so extra workers
# fill the idle CPU. Measured on 2 cores (docs/benchmarks.md): at e5d6c1b 2 workers 9 min 24 s, 3 workers 7 min 59 s,
# 4 workers 7 min 35 s with the CPU saturated; at 050648f (Lambda workers forked from a template, ~100 CPU-s less)
# 3 workers 6 min 36 s, 4 workers 6 min 7 s.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 2 )))
JUNIT_DIR := .aws-sam/junit
JUNIT = -o junit_family=xunit1 --junitxml=$(JUNIT_DIR)/$(1).xml
PYTEST := $(DEV_PY) -m pytest -q $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# The scale lane (`make test-scale`, run by .ci/run after `make test`): the cases at scale, minutes each on 2 cores.
# The fault suite (tests/reliability: its phases wait out Lambda timeouts, heartbeats and retry intervals on purpose;
# its job phases, hostile consumers and batch faults are three files on three stacks, so the workers run them side by
# side), the batch limits' 1,000 maximum-length jobs and 10 MiB drop, and 50 simultaneous jobs of three callers
# against the models' capacity. `make test` keeps a boundary case at each of those limits
# (tests/e2e/test_batch_boundaries.py: 40 maximum-length lines crossing SendMessageBatch's 1 MiB;
# test_batch_uploads.py and the unit tests: the 6 MB request and the 10 MB upload; test_capacity.py: 12 simultaneous
# jobs, four a caller against one image slot). SCALE_PATHS are ignored by
# `make test`, SCALE_TESTS (node ids) deselected; tests/unit/test_test_order.py checks that each still exists.
SCALE_PATHS := tests/reliability
SCALE_TESTS := tests/e2e/test_batch_limits.py::test_a_thousand_maximum_length_jobs_through_the_front_door \
	tests/e2e/test_batch_limits.py::test_a_ten_mebibyte_jsonl_of_four_byte_characters \
	tests/e2e/test_capacity.py::test_the_pipeline_never_exceeds_capacity_with_50_simultaneous_submits_from_three_callers
NOT_SCALE := $(addprefix --ignore=,$(SCALE_PATHS)) $(addprefix --deselect=,$(SCALE_TESTS))

test-unit: $(DEV_STAMP)
	@$(PYTEST) tests/unit

test-integration: $(DEV_STAMP)
	@$(PYTEST) tests/integration

test-e2e: $(DEV_STAMP) $(AWS_STAMP)
	@$(PYTEST) tests/e2e $(NOT_SCALE)

# `make test test-scale`: the lanes one after the other, not side by side (make runs goals in parallel, --jobs).
test-scale: $(DEV_STAMP) $(AWS_STAMP) | $(filter test,$(MAKECMDGOALS)) ## the scale lane: the fault suite, 1,000 maximum-length jobs, a 10 MiB drop (.ci/run runs it after make test)
	@mkdir -p $(JUNIT_DIR)
	@$(PYTEST) -p no:cacheprovider $(call JUNIT,scale) $(SCALE_PATHS) $(SCALE_TESTS)

CPU_LOG := $(JUNIT_DIR)/file-cpu.jsonl
test-durations: $(DEV_STAMP) ## run `make test` and `make test-scale`, then write their seconds and CPU seconds per file to tests/durations.json
	@mkdir -p $(JUNIT_DIR) && rm -f $(CPU_LOG)
	@OMNIREEL_FILE_CPU_LOG=$(abspath $(CPU_LOG)) $(MAKE) --no-print-directory test
	@OMNIREEL_FILE_CPU_LOG=$(abspath $(CPU_LOG)) $(MAKE) --no-print-directory test-scale
	@$(DEV_PY) scripts/test_durations.py $(JUNIT_DIR)/main.xml $(JUNIT_DIR)/waiting.xml $(JUNIT_DIR)/unit.xml $(JUNIT_DIR)/scale.xml $(CPU_LOG)

LINT_LOG := .aws-sam/lint.log
# The waiting lane: test files that spend most of their wall time waiting (Step Functions heartbeats and callback
# timeouts; the job deadline's sweeps; emulator restarts; real-time audio) run in their own pytest run beside the xdist
# workers, two files at a time. In a worker each left a CPU idle for most of its length (measured alone: CPU 20-60 %
# of wall); beside the workers they only add their bursts of CPU. Not skipped: their output follows pytest's, and
# either run failing fails `make test`. TEST_WORKERS=1 runs them inline. Every run measures coverage (below).
# The second half of the list is the rule's (tests/support/run_order.py: a file of tests/integration or tests/e2e that
# does not use the shared stack and was measured under 0.15 CPU-s per second of its length; a run's collection fails
# naming any such file not listed here): hostile and slow peers, the client's waits, a capacity wait. In the main run
# they came last and left a core idle for most of the run's last minute (fifteenth pass).
WAITING_LANE := tests/integration/pipeline/test_state_machine.py tests/e2e/test_executions.py \
	tests/e2e/test_supervisor.py tests/integration/relay/test_relay_long_utterances.py \
	tests/integration/relay/test_relay_with_emulator.py tests/unit/relay \
	tests/integration/client/test_hostile_answers.py tests/integration/local/test_sagemaker_capacity.py \
	tests/integration/client/test_ui_server.py tests/integration/client/test_wait_for_the_event.py \
	tests/integration/client/test_transport.py tests/integration/client/test_webhooks.py
WAIT_LOG := .aws-sam/waiting-lane.log
LANE := $(if $(filter 1,$(TEST_WORKERS)),,$(WAITING_LANE))
# The unit lane: tests/unit (no local stack, no network: one module or process at a time; minus its files in the
# waiting lane) runs in a third pytest run beside the others, two files at a time, at a lower CPU priority (nice
# UNIT_NICE). Its files only compute, while the e2e files wait on their stacks a third of the time (the first minute
# most: the longest files, handed out first, all wait at once): at the lower priority the unit files take the CPU the
# stacks leave idle and yield it to their bursts. Measured on 2 cores (docs/benchmarks.md, tenth pass): idle CPU of a
# run 70-77 -> 33-44 core-seconds. At the lowest priority (19; twelfth pass: three adjacent pairs 301/272, 284/275,
# 264/257 s against nice 5) the stacks' bursts take the CPU first and the lane's files still end before the main run
# (its longest test 15 s; the unit tests' waits on a subprocess are bounded at 60 s and more).
# Not skipped: its output follows pytest's, and its failing fails `make test`. TEST_WORKERS=1 runs it inline.
UNIT_LANE := tests/unit
UNIT_NICE := 19
UNIT_LOG := .aws-sam/unit-lane.log
# Both background lanes: their own pytest run, two files at a time, each file whole on one process.
LANE_PYTEST := $(DEV_PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder
UNITS := $(if $(filter 1,$(TEST_WORKERS)),,$(UNIT_LANE))

# Coverage of the product code (layers/omnireel/omnireel, functions/, relay/omnireel_relay, client/omnireel_client;
# settings in pyproject.toml [tool.coverage.*]), with COVERAGE=1 (`make test COVERAGE=1`; .ci/run runs that): in the
# test processes and in the Python processes they start that can measure themselves (coverage's patch =
# ["subprocess"]): while coverage is on, the local stacks' Lambda workers and relay run with .venv-dev's Python
# (tests/support/stack.py), so the code the e2e tests drive counts. local/ (the stack itself, the emulators: a dev
# tool) is not measured. Every process writes its own data file and pytest-cov combines a run's at its end; `make
# test` then combines the main run's and the two lanes' ($(COV_DIR)), prints the report and gates it
# (COVERAGE_GATE): the total at COVERAGE_FLOOR, and the modules that decide outcomes at their own floors
# (scripts/coverage_floors.py). `make coverage` shows the last measured run's again, with an HTML report.
# Off by default in `make test` (issue 35: "in .ci/run if it costs too much in make test"): measuring every Lambda
# worker and relay added 19 s and 31 s to runs measured next to one without it on 2 cores (docs/benchmarks.md, sixth
# pass), and the same tests run either way; CI measures and gates every change.
# Floor: on 2026-12-05 a whole idle make test measured 94.5% (the main run's test processes alone: 87%, the figure
# gated before); under 92% means tests (or their measurement) were lost.
COVERAGE ?= 0
MEASURE := $(filter 1,$(COVERAGE))
COV_DIR := .aws-sam/coverage
COVERAGE_FLOOR := 92
COV := COVERAGE_FILE=$(COV_DIR)/combined $(DEV_PY) -m coverage
COV_RUN = $(if $(MEASURE),COVERAGE_FILE=$(CURDIR)/$(COV_DIR)/$(1))
COV_ARGS := $(if $(MEASURE),--cov --cov-report=)

# The gate (a shell command; fails when a floor fails or there is no data): combine, report, JSON, per-module floors.
COVERAGE_GATE = data=$$(ls $(COV_DIR)/main $(COV_DIR)/waiting $(COV_DIR)/unit 2>/dev/null); \
	if [ -z "$$data" ]; then echo "no coverage data in $(COV_DIR): run make test first" >&2; exit 1; fi; \
	rm -f $(COV_DIR)/combined; $(COV) combine --keep -q $$data || exit 1; \
	echo "==> coverage of the product code: test processes, Lambda workers and relays (docs/development.md)"; \
	$(COV) report --fail-under=$(COVERAGE_FLOOR); total=$$?; \
	$(COV) json -q -o $(COV_DIR)/coverage.json && $(DEV_PY) scripts/coverage_floors.py $(COV_DIR)/coverage.json; \
	floors=$$?; [ $$total -eq 0 ] && [ $$floors -eq 0 ]

coverage: $(DEV_STAMP) ## the last `make test COVERAGE=1`'s coverage again: report, floors, HTML (.aws-sam/coverage/html/index.html)
	@( $(COVERAGE_GATE) ); gate=$$?; $(COV) html -q -d $(COV_DIR)/html && echo "==> $(COV_DIR)/html/index.html"; \
	 exit $$gate

test: $(DEV_STAMP) $(AWS_STAMP) $(SAM_STAMP) $(CHECKOV_STAMP) $(NODE_STAMP) ## lint gate, unit, integration, e2e tests, with a boundary case at each limit (the scale cases: make test-scale; COVERAGE=1: measured and gated)
	@# The lint gate (single-threaded tools, ~1 min, one at a time) runs in the background while pytest runs: the e2e
	@# tests spend much of their time waiting on the local stack, so the gate mostly fills idle CPU instead of adding
	@# its minute. Its output is printed after pytest's; either failing fails `make test` (`make lint` alone runs it in
	@# the foreground).
	@# Coverage (COVERAGE=1): see COVERAGE_FLOOR above; its report and gate come last.
	@mkdir -p $(dir $(LINT_LOG)) $(JUNIT_DIR) $(COV_DIR); $(if $(MEASURE),rm -f $(COV_DIR)/main $(COV_DIR)/waiting $(COV_DIR)/unit;) echo "==> lint gate in the background (output after the tests: $(LINT_LOG))"
	@$(MAKE) --no-print-directory -j1 lint >$(LINT_LOG) 2>&1 & gate=$$!; \
	 if [ -n "$(LANE)" ]; then echo "==> waiting lane in the background (output after the tests: $(WAIT_LOG))"; \
	   $(call COV_RUN,waiting) $(LANE_PYTEST) $(call JUNIT,waiting) $(COV_ARGS) $(LANE) \
	   >$(WAIT_LOG) 2>&1 & lane=$$!; fi; \
	 if [ -n "$(UNITS)" ]; then echo "==> unit lane in the background at nice $(UNIT_NICE) (output after the tests: $(UNIT_LOG))"; \
	   $(call COV_RUN,unit) nice -n $(UNIT_NICE) $(LANE_PYTEST) $(call JUNIT,unit) $(COV_ARGS) \
	   $(UNITS) $(addprefix --ignore=,$(LANE)) \
	   >$(UNIT_LOG) 2>&1 & unit=$$!; fi; \
	 $(call COV_RUN,main) $(PYTEST) $(call JUNIT,main) tests $(addprefix --ignore=,$(LANE) $(UNITS)) $(NOT_SCALE) $(COV_ARGS); \
	 tests=$$?; waits=0; if [ -n "$(LANE)" ]; then wait $$lane; waits=$$?; echo "==> waiting lane"; cat $(WAIT_LOG); fi; \
	 units=0; if [ -n "$(UNITS)" ]; then wait $$unit; units=$$?; echo "==> unit lane"; cat $(UNIT_LOG); fi; \
	 wait $$gate; lint=$$?; cat $(LINT_LOG); \
	 $(if $(MEASURE),( $(COVERAGE_GATE) ); cov=$$?;,echo "==> coverage: not measured (make test COVERAGE=1 measures and gates it; .ci/run does)"; cov=0;) \
	 if [ $$lint -ne 0 ]; then echo "make test: the lint gate failed (exit $$lint; output above)" >&2; fi; \
	 if [ $$waits -ne 0 ]; then echo "make test: the waiting lane failed (exit $$waits; output above)" >&2; fi; \
	 if [ $$units -ne 0 ]; then echo "make test: the unit lane failed (exit $$units; output above)" >&2; fi; \
	 if [ $$tests -ne 0 ]; then echo "make test: pytest failed (exit $$tests)" >&2; fi; \
	 if [ $$cov -ne 0 ]; then echo "make test: the coverage gate failed (output above)" >&2; fi; \
	 [ $$lint -eq 0 ] && [ $$waits -eq 0 ] && [ $$units -eq 0 ] && [ $$tests -eq 0 ] && [ $$cov -eq 0 ]

# docs/cli.md is generated from the CLI's parser (cli/omnireel_cli/reference.py); tests/unit/docs/test_cli_reference.py
# fails when it is stale.
docs: $(STAMP) ## regenerate docs/cli.md from the omnireel CLI's parser
	@$(PY) -m omnireel_cli.reference docs/cli.md
	@echo "==> docs/cli.md"

demo: $(STAMP) $(EMU_STAMP) ## start the local stack and run one prompt -> image -> video job
	@$(VENV)/bin/omnireel demo

build: $(SAM_STAMP) ## sam build (no container needed)
	@PATH="$(dir $(PYTHON_BOOT)):$$PATH" SAM_CLI_TELEMETRY=0 $(SAM) build

# The benches run with .venv-dev's Python (numpy, PyAV), except cold_start: it measures .venv's packages as the layer.
bench: $(DEV_STAMP) $(SAM_STAMP) ## all benchmarks -> docs/benchmarks/ and docs/benchmarks.md, docs/reliability.md, docs/capacity.md (~1 h with bench/batch.py; not part of make test)
	@$(DEV_PY) bench/video_request_prep.py
	@$(PY) bench/cold_start.py --instructions
	@$(DEV_PY) bench/capacity.py
	@$(DEV_PY) bench/relay_bench.py
	@$(DEV_PY) bench/orchestration_overhead.py
	@$(DEV_PY) bench/fairness.py
	@$(DEV_PY) bench/load.py
	@$(DEV_PY) bench/batch.py
	@$(DEV_PY) bench/reliability.py
	@$(DEV_PY) bench/interpreter.py

ENV ?= dev
preflight: $(STAMP) ## checks that would fail a deploy late (rules, names, DLC tag, network): make preflight ENV=dev REGION=r
	@test -n "$(REGION)" || { echo "usage: make preflight ENV=dev|prod REGION=<region> [STACK=name]" >&2; exit 2; }
	@$(VENV)/bin/omnireel preflight --config-env $(ENV) --region $(REGION) $(if $(STACK),--stack-name $(STACK))

deploy: preflight $(SAM_STAMP) ## preflight, sam build, sam deploy: make deploy ENV=dev|prod REGION=r [STACK=name]
	@PATH="$(dir $(PYTHON_BOOT)):$$PATH" SAM_CLI_TELEMETRY=0 $(SAM) build
	@SAM_CLI_TELEMETRY=0 $(SAM) deploy --config-env $(ENV) --region $(REGION) $(if $(STACK),--stack-name $(STACK))

smoke: $(STAMP) $(if $(STACK),,$(EMU_STAMP)) ## post-deploy smoke test: image, 4-step video, TTS (STACK=name; default the local stack)
	@$(VENV)/bin/omnireel smoke $(if $(STACK),--stack $(STACK))

RELAY_PLATFORM ?= linux/arm64
relay-image: ## build and push the relay image: make relay-image RELAY_IMAGE=<account>.dkr.ecr.<region>.amazonaws.com/omnireel-relay:<tag>
	@test -n "$(RELAY_IMAGE)" || { echo "usage: make relay-image RELAY_IMAGE=<ecr repository uri>:<tag> (docs/operations/deploy.md)" >&2; exit 2; }
	@command -v docker >/dev/null || { echo "relay-image needs docker with buildx (docs/operations/deploy.md)" >&2; exit 2; }
	docker buildx build --platform $(RELAY_PLATFORM) -f relay/Dockerfile -t $(RELAY_IMAGE) --push relay/

destroy: $(STAMP) $(SAM_STAMP) ## empty the stack's buckets, sam delete, report: make destroy STACK=name REGION=r [CONFIRM=yes]
	@test -n "$(STACK)" || { echo "usage: make destroy STACK=name [REGION=us-east-1] [CONFIRM=yes]" >&2; exit 2; }
	@SAM_CLI_TELEMETRY=0 $(PY) scripts/destroy_stack.py --stack $(STACK) $(if $(REGION),--region $(REGION)) \
		$(if $(filter yes,$(CONFIRM)),--yes) --sam $(SAM)

clean: ## remove build outputs and local stack state (keeps the venvs)
	rm -rf .aws-sam out .omnireel .pytest_cache .ruff_cache
	find . -path './.venv*' -prune -o -path ./node_modules -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
