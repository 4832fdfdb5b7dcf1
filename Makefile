# The two commands of the README. Each installs what it needs first (scripts/setup.sh).
.PHONY: run test setup lint bench

setup:
	./scripts/setup.sh

# The main job on the embedded default: vLLM CPU build, a tiny generated model, engine defaults.
run: setup
	.venv/bin/bringup run

# The whole test suite (the same command CI runs).
test: setup
	.venv/bin/python -m pytest -q

lint: setup
	.venv/bin/ruff check bringup tests benchmarks
