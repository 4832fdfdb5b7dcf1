# The two commands of the README. Each installs what it needs first (scripts/setup.sh).
.PHONY: run test test-fast test-sglang setup setup-run setup-sglang lint check bench

# What the tests need (the dev tools, transformers serve, Ray, Chromium), after what the main job needs.
setup:
	./scripts/setup.sh test

# Only what the main job needs: the vLLM CPU build and bringup.
setup-run:
	./scripts/setup.sh run

# The main job on the embedded default: vLLM CPU build, a tiny generated model, engine defaults.
run: setup-run
	.venv/bin/bringup run

# The whole test suite (the same command CI runs): the fast tier first, so a broken unit fails in
# a minute, then the rest (scenario launches, the browser test, the real vLLM CPU build).
# A tier that selects nothing makes pytest exit 5; that is no failure of the suite (tests/test_tiers.py
# keeps both tiers non-empty), so it is reported and passed over.
FAST = not engine and not slow and not sglang
REST = (slow or engine) and not sglang
tier = .venv/bin/python -m pytest -q -m "$(1)" || { rc=$$?; [ $$rc -eq 5 ] && echo "no tests in the tier -m '$(1)'"; [ $$rc -eq 5 ]; }

test: setup
	$(call tier,$(FAST))
	$(call tier,$(REST))

# Real SGLang 0.5.23 (its own venv, .venv-sglang: about 11 GB with its CUDA PyTorch, so not part of
# `make test`; CI may skip it): help, parse-args failures, server_args= and the CPU failure, for real.
setup-sglang:
	./scripts/setup-sglang.sh

test-sglang: setup setup-sglang
	BRINGUP_SGLANG_PYTHON=$(CURDIR)/.venv-sglang/bin/python .venv/bin/python -m pytest -q -m sglang

# The fast tier alone (under a minute on 2 cores): unit tests, in-process fakes, no engine launch.
test-fast: setup
	$(call tier,$(FAST))

lint: setup
	.venv/bin/ruff check bringup tests benchmarks scripts

# What CI runs before the tests (scripts/check): ruff check, ruff format --check, mypy on the
# package, and the complexity ceiling (complexity-ceiling.txt, scripts/complexity.py).
check: setup
	./scripts/check
