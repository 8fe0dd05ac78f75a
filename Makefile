# Both targets do all set-up first (idempotent): see scripts/setup.sh.
.PHONY: setup train test test-deep test-browser test-ray lint integration

setup:
	bash scripts/setup.sh

train: setup
	HF_HUB_OFFLINE=1 .venv/bin/python -m envs.twenty_questions.train $(ARGS)

test:
	bash scripts/test.sh $(PYTEST_ARGS)

# The results viewer in a real headless Chromium (installs chromium via apt and playwright-core via npm).
test-browser:
	bash scripts/setup_browser.sh
	bash scripts/test.sh -m browser tests/test_viewer_browser.py $(PYTEST_ARGS)

# Every hypothesis property test at ten times its examples, fresh random draws (tests/conftest.py).
test-deep:
	HYPOTHESIS_PROFILE=deep bash scripts/test.sh -m property $(PYTEST_ARGS)

# The rollout executors on a local Ray cluster alone (also part of `make test`; docs/executors.md).
test-ray:
	bash scripts/test.sh -m ray tests/test_executors_ray.py $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check . && .venv/bin/pyright

# Opt-in, slow (10-20 min from a fresh clone on 2 cores, 5-7 min of it the check; 35-60 min at load 15-20;
# the first run installs SkyRL tx, ~3-10 min and 2.3 GB, into
# .venv-skyrl): train against a real Tinker-API server over HTTP, kill -9, resume. See the README.
integration: setup
	bash scripts/integration/setup_server.sh
	HF_HUB_OFFLINE=1 .venv/bin/python scripts/integration/tinker_server.py $(ARGS)
