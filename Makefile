# Both targets do all set-up first (idempotent): see scripts/setup.sh.
.PHONY: setup train test lint

setup:
	bash scripts/setup.sh

train: setup
	HF_HUB_OFFLINE=1 .venv/bin/python -m envs.twenty_questions.train $(ARGS)

test:
	bash scripts/test.sh $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check . && .venv/bin/pyright
