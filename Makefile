# retfwheel developer entry points. The README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
OUT    ?= dist
RECIPE ?= recipes/emulated-py36.toml

.PHONY: setup demo test test-fast lint reference bench clean docker-verify

setup: $(VENV)/.installed

# The shipped recipes compile the op library inside a Debian root that debootstrap makes (as root).
$(VENV)/.installed: pyproject.toml
	@if [ "$$(id -u)" = 0 ] && ! command -v debootstrap >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q --upgrade pip
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[test]'
	touch $@

# Build the recipe's default input (tensorflow-cpu==2.6.2 for Python 3.6, downloaded once and cached),
# then verify the result in the recipe's emulated old environment and print the table.
demo: setup
	$(BIN)/retfwheel build --recipe $(RECIPE) --out-dir $(OUT) --report $(OUT)/report.json
	$(BIN)/retfwheel verify $$(ls -t $(OUT)/*.whl | head -n 1) --recipe $(RECIPE)

# Every test, the slow end-to-end ones included (they download the real TensorFlow wheel once).
test: setup
	$(BIN)/python -m pytest

# Types and lint (rules in pyproject.toml): mypy on the tool, ruff on every Python file.
lint: setup
	$(BIN)/mypy tools/retfwheel
	$(BIN)/ruff check tools tests bench runtime

# docs/reference.md from the commands themselves (tests/test_reference.py checks it).
reference: setup
	$(BIN)/retfwheel reference > docs/reference.md

test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

bench: setup
	$(BIN)/python bench/bench_build.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache

# For machines with a Docker engine: verify WHEEL natively inside the Ubuntu 18.04 image.
WHEEL ?= $(shell ls -t $(OUT)/*.whl 2>/dev/null | head -n 1)
docker-verify:
	docker build -f docker/ubuntu18.04-py36/Dockerfile -t retfwheel/ubuntu18.04-py36 .
	docker run --rm -v "$(abspath $(dir $(WHEEL))):/wheels:ro" retfwheel/ubuntu18.04-py36 /wheels/$(notdir $(WHEEL))
