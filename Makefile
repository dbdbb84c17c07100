# omnireel — developer entry points. Quick start: `make demo`, then `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_BOOT := $(shell scripts/find-python)
VENV        := .venv
PY          := $(VENV)/bin/python
PIP         := $(PY) -m pip --disable-pip-version-check -q
SAM_VENV    := .venv-sam
SAM         := $(SAM_VENV)/bin/sam
STAMP       := $(VENV)/.installed
SAM_STAMP   := $(SAM_VENV)/.installed
NODE_STAMP  := node_modules/.installed
# Quiet pip's notes about local mirrors that do not exist on every machine.
PIP_FILTER  := 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }

.PHONY: help venv sam-venv lint test test-unit test-integration test-e2e demo build validate clean destroy bench

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): requirements/*.txt layers/omnireel/requirements.txt relay/requirements.txt pyproject.toml
	@test -n "$(PYTHON_BOOT)" || { echo "no Python >= 3.12 found" >&2; exit 1; }
	@echo "==> creating $(VENV) with $(PYTHON_BOOT)"
	@test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	@$(PIP) install -r requirements/dev.txt -c requirements/constraints.txt $(PIP_FILTER)
	@$(PIP) install --no-deps -e . $(PIP_FILTER)
	@touch $@

venv: $(STAMP) ## create .venv (Python 3.13) with pinned dependencies and the omnireel CLI

$(SAM_STAMP): requirements/sam.txt
	@echo "==> creating $(SAM_VENV) (SAM CLI pins its own boto3)"
	@test -x $(SAM_VENV)/bin/python || $(PYTHON_BOOT) -m venv $(SAM_VENV)
	@$(SAM_VENV)/bin/python -m pip --disable-pip-version-check -q install -r requirements/sam.txt $(PIP_FILTER)
	@touch $@

sam-venv: $(SAM_STAMP) ## create .venv-sam with the pinned SAM CLI

$(NODE_STAMP): package.json package-lock.json
	@echo "==> installing asl-validator (npm ci)"
	@npm ci --silent --no-audit --no-fund
	@touch $@

validate: $(STAMP) $(SAM_STAMP) $(NODE_STAMP) ## sam validate --lint and ASL validation
	@echo "==> sam validate --lint"
	@AWS_DEFAULT_REGION=us-east-1 SAM_CLI_TELEMETRY=0 $(SAM) validate --lint --template template.yaml
	@echo "==> asl-validator (statemachine/pipeline.asl.json with the template's substitutions)"
	@$(PY) -m omnireel_local.cfn_template .aws-sam/asl >/dev/null
	@npx --no-install asl-validator --json-path .aws-sam/asl/pipeline.asl.json

lint: $(STAMP) validate ## ruff + sam validate --lint + ASL validation
	@echo "==> ruff"
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check . >/dev/null || { echo "ruff format: run '$(VENV)/bin/ruff format .'" >&2; exit 1; }

test-unit: $(STAMP)
	@$(PY) -m pytest -q tests/unit

test-integration: $(STAMP)
	@$(PY) -m pytest -q tests/integration

test-e2e: $(STAMP)
	@$(PY) -m pytest -q tests/e2e

test: lint $(STAMP) ## lint, then unit, integration and e2e tests
	@$(PY) -m pytest -q tests

demo: $(STAMP) ## start the local stack and run one prompt -> image -> video job
	@$(VENV)/bin/omnireel demo

build: $(SAM_STAMP) ## sam build (no container needed)
	@PATH="$(dir $(PYTHON_BOOT)):$$PATH" SAM_CLI_TELEMETRY=0 $(SAM) build

clean: ## remove build outputs and local stack state (keeps the venvs)
	rm -rf .aws-sam out .omnireel .pytest_cache .ruff_cache
