# make demo / make test set everything up from a fresh clone: a virtual environment, the
# dependencies (torch first, as its CPU build, so nothing pulls a CUDA build), the C extension.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.ldptext-setup
CACHE   ?= $(HOME)/.cache/ldptext
DEMO_BUNDLE := $(CACHE)/demo-glove-santextplus-eps3.bundle

.PHONY: setup native test demo bench clean

setup: $(STAMP)

$(STAMP): setup.py requirements/assets.txt requirements/nodeps.txt
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip setuptools wheel
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -r requirements/assets.txt
	$(VPY) -m pip install -q --no-deps -r requirements/nodeps.txt
	$(VPY) -m pip install -q -e '.[precompute,evaluate,test]'
	$(VPY) -c "import ldptext._native"   # the extension must build here; the fallback is for users
	touch $(STAMP)

# Rebuild the C extension in place after editing native/.
native: setup
	$(VPY) setup.py -q build_ext --inplace

test: setup native
	$(VPY) -m pytest -q tests

demo: setup native
	$(VENV)/bin/ldptext demo --cache $(CACHE)

bench: setup native
	$(VPY) benchmarks/bench_santext.py

clean:
	rm -rf build $(VENV) sdk/_native*.so
