# streamrt: `make demo` and `make test` set up a fresh Debian 12 machine (as root) and run.
SHELL := /bin/bash
.DEFAULT_GOAL := help
JOBS ?= $(shell nproc)
PYTHON ?= /usr/bin/python3
BUILD ?= build
LAUNCHER := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache,)
CMAKE_FLAGS ?=

# Debian packages the build, tests, benchmarks and Python package use.
APT_PACKAGES := g++ make cmake pkg-config libtbb-dev libopenblas-dev libgtest-dev libgmock-dev \
  libbenchmark-dev pybind11-dev python3-dev python3-numpy python3-pytest libboost-dev \
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clang clang-format-14 libclang-rt-14-dev \
  libhwy-dev python3-venv python3-setuptools python3-pip python3-wheel python3-torch libtorch-dev \
  libopenmpi-dev openmpi-bin python3-mpi4py

.PHONY: help deps torch2-venv test-python-torch2 configure build demo test test-cpp test-schedule test-fuzz test-tsan test-asan \
  build-asan test-python test-bench bench format clean test-release test-pip test-pip-torch2

help:
	@echo "make demo   - install what is missing, build, run the streamrt demo"
	@echo "make test   - install what is missing, build, run every test (also TSan and ASan+UBSan)"
	@echo "make bench  - build and run the benchmarks"

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "== installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "== all packages present"; fi

# torch 2.x from PyPI (python/torch2-requirements.txt) in a virtual environment made from $(PYTHON),
# cached outside the clone with its wheels: a second `make test` downloads and installs nothing.
# `make test` builds _streamrt_torch for it too and runs the Python tests in it.
STREAMRT_CACHE ?= $(HOME)/.cache/streamrt
TORCH2_REQUIREMENTS := python/torch2-requirements.txt
TORCH2_KEY := $(shell grep -v '^\#' $(TORCH2_REQUIREMENTS) 2>/dev/null | sha256sum | cut -c1-12)
TORCH2_VENV ?= $(STREAMRT_CACHE)/venv-torch2-$(TORCH2_KEY)
TORCH2_PYTHON := $(TORCH2_VENV)/bin/python
TORCH2 ?=
test: TORCH2 := 1
# What `pip install --no-build-isolation .` needs beside torch 2.x's own requirements (which bring
# setuptools) in an environment without Debian's packages (test-pip-torch2): pyproject.toml's wheel.
# Cached with the torch 2.x wheels (tried offline first: once cached, nothing is downloaded).
PIP_BUILD_REQUIREMENTS := setuptools==84.2.1 wheel==0.48.0

torch2-venv: deps
	@if [ -f $(TORCH2_VENV)/.complete ]; then echo "== torch 2.x environment: $(TORCH2_VENV)"; \
	else set -e; echo "== making the torch 2.x environment $(TORCH2_VENV)"; \
	  rm -rf $(STREAMRT_CACHE)/venv-torch2-*; \
	  mkdir -p $(STREAMRT_CACHE)/wheels; \
	  $(PYTHON) -m pip download -q -d $(STREAMRT_CACHE)/wheels -r $(TORCH2_REQUIREMENTS); \
	  $(PYTHON) -m venv $(TORCH2_VENV); \
	  $(TORCH2_PYTHON) -m pip install -q --no-index --find-links $(STREAMRT_CACHE)/wheels \
	    -r $(TORCH2_REQUIREMENTS); \
	  $(TORCH2_PYTHON) -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'; \
	  touch $(TORCH2_VENV)/.complete; fi
	@$(PYTHON) -m pip download -q -d $(STREAMRT_CACHE)/wheels --no-index \
	  --find-links $(STREAMRT_CACHE)/wheels $(PIP_BUILD_REQUIREMENTS) 2>/dev/null || \
	  $(PYTHON) -m pip download -q -d $(STREAMRT_CACHE)/wheels $(PIP_BUILD_REQUIREMENTS)

# Warnings are errors in `make test`'s builds (our own checks), never in a user's `make demo`.
WERROR ?= OFF
test: WERROR := ON

configure: deps
	$(if $(TORCH2),$(MAKE) --no-print-directory torch2-venv)
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$(PYTHON) -DSTREAMRT_BUILD_PYTHON=ON -DSTREAMRT_WERROR=$(WERROR) $(LAUNCHER) $(CMAKE_FLAGS) \
	  -DSTREAMRT_EXTRA_TORCH_PYTHONS=$(if $(TORCH2),$(TORCH2_PYTHON))

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only what the demo runs: the library and the streamrt tool.
demo: configure
	cmake --build $(BUILD) --target streamrt_tool -j $(JOBS)
	cd $(BUILD) && ./tools/streamrt/streamrt demo

test: build
	$(MAKE) --no-print-directory test-cpp test-python test-python-torch2 test-bench test-schedule test-tsan test-asan \
	  test-fuzz
	$(MAKE) --no-print-directory test-release test-pip test-pip-torch2
	@echo "== all test stages passed"

test-cpp:
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(JOBS)

# The Python package's tests, with Debian's interpreter, against the module built in $(BUILD).
# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
test-python:
	@test -f $(BUILD)/python/streamrt/__init__.py || { echo "test-python: $(BUILD) has no Python \
	  package (configure with -DSTREAMRT_BUILD_PYTHON=ON)"; exit 1; }
	STREAMRT_EXPECT_TORCH_NATIVE=1 PYTHONPATH=$(CURDIR)/$(BUILD)/python $(PYTHON) -m pytest \
	  -p no:cacheprovider -q -rs python/tests; \
	  rc=$$?; if [ $$rc -eq 5 ]; then echo "test-python: no tests collected"; exit 1; fi; exit $$rc

# The same tests with torch 2.x and numpy 2.x (the torch2-venv environment), against the
# _streamrt_torch built for that torch (<build>/python-torch1).
test-python-torch2:
	@test -f $(TORCH2_VENV)/.complete || { echo "test-python-torch2: no torch 2.x environment \
	  (make torch2-venv, then configure with TORCH2=1; make test does both)"; exit 1; }
	@test -f $(BUILD)/python-torch1/streamrt/__init__.py || { echo "test-python-torch2: $(BUILD) \
	  was configured without the torch 2.x environment (make configure TORCH2=1)"; exit 1; }
	STREAMRT_EXPECT_TORCH_NATIVE=1 PYTHONPATH=$(CURDIR)/$(BUILD)/python-torch1 $(TORCH2_PYTHON) \
	  -m pytest -p no:cacheprovider -q \
	  -rs python/tests; rc=$$?; if [ $$rc -eq 5 ]; then echo "test-python-torch2: no tests \
	  collected"; exit 1; fi; exit $$rc

# The runtime's tests under ThreadSanitizer. setarch -R: gcc 12's TSan cannot map its shadow
# memory with the high ASLR entropy of recent kernels.
test-tsan: deps
	cmake -S . -B build-tsan -DSTREAMRT_SANITIZER=thread -DSTREAMRT_BUILD_BENCH=OFF -DSTREAMRT_BUILD_PYTHON=OFF \
	  -DSTREAMRT_BUILD_EXAMPLES=OFF -DSTREAMRT_BUILD_TOOLS=OFF -DSTREAMRT_WERROR=ON $(LAUNCHER)
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  setarch $$(uname -m) -R ctest --output-on-failure --timeout 900 -L runtime -j $(JOBS)

# The runtime tests again under the schedule fuzzer (docs/reliability.md): once picking
# among ready streams at random (seeded: SCHEDULE_SEED=n replays a run's picks; the Python tests
# run under the same seed), once with everything on one worker. Tests that prove work runs on
# several workers at once skip themselves under serial, saying why (tests/unit/schedule_util.hpp).
SCHEDULE_SEED ?= $(shell date +%s)
# The random stage runs with the read checker on (docs/reliability.md, "The read checker"): a
# test that touched memory with a queued write through a raw pointer would abort.
test-schedule:
	@echo "== STREAMRT_SCHEDULE=random:$(SCHEDULE_SEED) STREAMRT_READ_CHECK=1 (replay: make test-schedule SCHEDULE_SEED=$(SCHEDULE_SEED))"
	cd $(BUILD) && STREAMRT_SCHEDULE=random:$(SCHEDULE_SEED) STREAMRT_READ_CHECK=1 \
	  ctest --output-on-failure --timeout 600 -L runtime -j $(JOBS)
	STREAMRT_SCHEDULE=random:$(SCHEDULE_SEED) STREAMRT_READ_CHECK=1 $(MAKE) --no-print-directory \
	  test-python
	@echo "== STREAMRT_SCHEDULE=serial"
	cd $(BUILD) && STREAMRT_SCHEDULE=serial \
	  ctest --output-on-failure --timeout 600 -L runtime -j $(JOBS)

# The runtime tests under ASan+UBSan, built with clang so that the same build also has the
# libFuzzer harness (fuzz/; the library is instrumented for coverage): one sanitizer build serves
# both stages. The fork tests skip themselves here: ASan's allocator (GCC 12's and clang 14's) is
# not fork-safe with live threads, a child can hang in malloc; they run in the normal build and
# under TSan.
build-asan: deps
	cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++ -DSTREAMRT_SANITIZER=address \
	  -DSTREAMRT_BUILD_BENCH=OFF -DSTREAMRT_BUILD_PYTHON=OFF -DSTREAMRT_BUILD_EXAMPLES=OFF \
	  -DSTREAMRT_BUILD_TOOLS=OFF -DSTREAMRT_WERROR=ON $(LAUNCHER)
	cmake --build build-asan -j $(JOBS)

test-asan: build-asan
	cd build-asan && ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
	  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
	  ctest --output-on-failure --timeout 900 -L runtime -j $(JOBS)

# libFuzzer over the API (fuzz/), from the ASan+UBSan build, with the read checker on:
# FUZZ_SECONDS of fuzzing. A crash, a hang (-timeout), a leak or a sanitizer report fails the
# stage; libFuzzer leaves the reproducer in build-asan/ (replay: build-asan/fuzz/streamrt_fuzz
# <file>).
FUZZ_SECONDS ?= 60
test-fuzz: build-asan
	rm -rf build-asan/corpus && mkdir -p build-asan/corpus
	cd build-asan && UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" STREAMRT_READ_CHECK=1 \
	  ASAN_OPTIONS="allocator_may_return_null=1" ./fuzz/streamrt_fuzz \
	  -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
	  -artifact_prefix=./ corpus 2> fuzz.log || { tail -n 80 fuzz.log; exit 1; }
	@tail -n 6 build-asan/fuzz.log

# `streamrt bench --quick` once, with every peer (bench/streamrt_compare: the tool's bench built
# against oneTBB, Asio and OpenCL; the installed tool has only the peers that need no other
# library), as a smoke test: it must finish and write valid JSON. Its numbers are never checked
# (shared, noisy machines); the table goes to bench-smoke/table.txt.
test-bench:
	rm -rf $(BUILD)/bench-smoke && mkdir -p $(BUILD)/bench-smoke
	cd $(BUILD) && timeout 600 ./bench/streamrt_compare bench --quick --out bench-smoke \
	  > bench-smoke/table.txt
	$(PYTHON) -m json.tool $(BUILD)/bench-smoke/bench.json > /dev/null
	PYTHONPATH=$(CURDIR)/$(BUILD)/python timeout 600 $(PYTHON) bench/torch_install.py --quick \
	  --reps 1 > $(BUILD)/bench-smoke/torch.txt
	PYTHONPATH=$(CURDIR)/$(BUILD)/python timeout 600 $(PYTHON) bench/torch_vs_threads.py --quick \
	  --reps 1 > $(BUILD)/bench-smoke/torch_vs_threads.txt
	@echo "== bench smoke run passed: $(BUILD)/bench-smoke/ (bench.json is valid JSON, torch*.txt)"

# The full comparison with every peer (table, bench.json, plots in $(BUILD)/bench-out), then the
# Google Benchmark suite of the stream cases.
bench: build
	cd $(BUILD) && ./bench/streamrt_compare bench --out bench-out
	cd $(BUILD) && ./bench/streamrt_bench

# The Release configuration (-O3, as users and packagers build it) with warnings as errors: the
# library and the tests, run by CTest (the install test included). Bench, Python, examples and the
# tool are left to the main build.
test-release: deps
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DSTREAMRT_WERROR=ON \
	  -DSTREAMRT_BUILD_BENCH=OFF -DSTREAMRT_BUILD_PYTHON=OFF -DSTREAMRT_BUILD_EXAMPLES=OFF \
	  -DSTREAMRT_BUILD_TOOLS=OFF $(LAUNCHER)
	cmake --build build-release -j $(JOBS)
	cd build-release && ctest --output-on-failure --timeout 600 -j $(JOBS)

# `pip install .` (pyproject.toml, setup.py) with Debian's pip and setuptools, offline, into a
# virtual environment that sees Debian's numpy; setup.py builds the library, the extension, the
# streamrt tool and, with MPI, streamrt.distributed's. Then the installed package is used from
# outside the tree, and its `streamrt` command and `python -m streamrt` run the tool.
test-pip: deps
	rm -rf build-pip build-venv
	$(PYTHON) -m venv --system-site-packages build-venv
	CMAKE_ARGS="-DSTREAMRT_WERROR=ON $(LAUNCHER)" CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) \
	  build-venv/bin/pip install --no-build-isolation --no-index -q .
	cd build-venv && bin/python -c 'import streamrt, numpy as np; \
	  site = "$(CURDIR)/build-venv/lib/"; assert streamrt.__file__.startswith(site), streamrt.__file__; \
	  y = streamrt.ones(4, 4) @ streamrt.ones(4, 4); assert np.array_equal(y.numpy(), np.full((4, 4), 4.0, np.float32)); \
	  print("pip-installed streamrt", streamrt.__version__, "from", streamrt.__file__)'
	cd build-venv && bin/python -c 'import streamrt.distributed as d; \
	  assert d._mpi is not None, "the pip install has no streamrt.distributed: %s" % d._import_error'
	cd build-venv && bin/python -c 'import streamrt.torch, streamrt._torch_submit as s; \
	  assert s.native() is not None, "the pip install has no streamrt._streamrt_torch (libtorch-dev)"; \
	  assert s.unavailable("fast") is None, s.unavailable("fast")'
	cd build-venv && bin/python -m streamrt | tee version.txt
	grep -q "^library: $(CURDIR)/build-venv/lib/" build-venv/version.txt
	cd build-venv && bin/streamrt --help | grep -q "^  demo "
	cd build-venv && bin/streamrt demo --size 128 --iters 2 --small-size 64 --small-iters 10 \
	  --runs 1 --out demo-out > demo.txt || { cat demo.txt; exit 1; }
	grep -q "^all checks passed" build-venv/demo.txt
	cd build-venv && bin/python -m streamrt bench --list --filter 'round_trip/streamrt$$' \
	  | grep -qx 'round_trip/streamrt'
	@echo "== pip install . passed (build-venv)"

# `pip install .` as a torch 2.x user runs it: a fresh virtual environment from $(PYTHON) that sees
# none of Debian's packages (no Debian torch 1.13), with PyPI's torch 2.x and its numpy
# (python/torch2-requirements.txt) from the wheel cache only. The install must build
# _streamrt_torch against that torch's own headers; then streamrt.torch.install() runs the seed
# example. A wheel built from the checkout, installed into a second such environment, passes the
# same check. --no-build-isolation, with setuptools and wheel from the cache in the environment:
# pip's isolated build environment hides the environment's torch from setup.py and from the
# interpreter CMake asks for torch's headers (torch cannot be a build requirement: it must be the
# user's own), so the package would build without the fast path (offline, isolation reaches a
# build backend at all only when setuptools and wheel are in --find-links). pybind11 is Debian's
# pybind11-dev, found by CMake through its config.
# Built in test-pip's CMake build (build-pip), which it leaves behind: reconfigured for this
# interpreter, only _streamrt_torch is compiled again (for this torch); the wheel reuses that build. The install runs with -v for setup.py's line saying
# whether the fast path was built (pip shows a build's output only then). Last, the same install
# beside that torch with its headers hidden (a torch without them): it must say why there is no
# fast path, and streamrt.torch must run the seed example through Python.
PIP_TORCH2_DIR = $$(build-venv-torch2/bin/python -c 'import sysconfig; \
  print(sysconfig.get_path("purelib"))')/torch
PIP_TORCH2_CHECK := import torch, streamrt.torch, streamrt._torch_submit as s; \
  assert s.native() is not None, "no streamrt._streamrt_torch: " + str(s.unavailable("runner")); \
  assert s.native().built_for == torch.__version__, (s.native().built_for, torch.__version__); \
  assert s.unavailable("fast") is None, s.unavailable("fast"); \
  print("streamrt", streamrt.__version__, "fast path for torch", torch.__version__, "from", \
  streamrt.__file__)
PIP_TORCH2_VENV = $(PYTHON) -m venv $(1) && $(1)/bin/pip install -q --no-index \
  --find-links $(STREAMRT_CACHE)/wheels -r $(TORCH2_REQUIREMENTS) $(2)
test-pip-torch2: torch2-venv
	rm -rf build-venv-torch2 build-venv-torch2-wheel
	$(call PIP_TORCH2_VENV,build-venv-torch2,$(PIP_BUILD_REQUIREMENTS))
	CMAKE_ARGS="-DSTREAMRT_WERROR=ON $(LAUNCHER)" \
	  CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) build-venv-torch2/bin/pip install --no-build-isolation \
	  --no-index --find-links $(STREAMRT_CACHE)/wheels -v . > build-venv-torch2/install.log 2>&1 \
	  || { tail -n 80 build-venv-torch2/install.log; exit 1; }
	grep "^ *streamrt: streamrt._streamrt_torch (streamrt.torch's fast path) built for torch" \
	  build-venv-torch2/install.log
	set -o pipefail; cd build-venv-torch2 && bin/python -c '$(PIP_TORCH2_CHECK)' | tee check.txt
	grep -q " from $(CURDIR)/build-venv-torch2/lib/" build-venv-torch2/check.txt
	cd build-venv-torch2 && bin/python $(CURDIR)/examples/python/seed_torch_streams.py > seed.txt \
	  || { cat seed.txt; exit 1; }
	CMAKE_ARGS="-DSTREAMRT_WERROR=ON $(LAUNCHER)" \
	  CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) build-venv-torch2/bin/pip wheel --no-deps \
	  --no-build-isolation -q -w build-pip/wheel-torch2 .
	$(call PIP_TORCH2_VENV,build-venv-torch2-wheel)
	build-venv-torch2-wheel/bin/pip install --no-index --no-deps -q \
	  build-pip/wheel-torch2/streamrt-*.whl
	set -o pipefail; cd build-venv-torch2-wheel && bin/python -c '$(PIP_TORCH2_CHECK)' \
	  | tee check.txt
	grep -q " from $(CURDIR)/build-venv-torch2-wheel/lib/" build-venv-torch2-wheel/check.txt
	cd $(PIP_TORCH2_DIR) && mv include include.hidden
	CMAKE_ARGS="-DSTREAMRT_WERROR=ON $(LAUNCHER)" \
	  CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) build-venv-torch2/bin/pip install --no-build-isolation \
	  --no-index --find-links $(STREAMRT_CACHE)/wheels -v . > build-venv-torch2/headerless.log \
	  2>&1 || { tail -n 80 build-venv-torch2/headerless.log; exit 1; }
	grep "^ *streamrt: .*(streamrt.torch's fast path) not built: .* has no C++ headers" \
	  build-venv-torch2/headerless.log
	cd build-venv-torch2 && bin/python -c 'import streamrt.torch, streamrt._torch_submit as s; \
	  assert s.native() is None, s.native()'
	cd build-venv-torch2 && bin/python $(CURDIR)/examples/python/seed_torch_streams.py \
	  > seed-headerless.txt 2>&1 || { cat seed-headerless.txt; exit 1; }
	cd $(PIP_TORCH2_DIR) && mv include.hidden include
	@echo "== pip install . and its wheel beside PyPI's torch 2.x passed (build-venv-torch2*)"

# The C++ sources that `make test` checks (tests/source/check_format.py), formatted in place.
format:
	$(PYTHON) tests/source/check_format.py . --fix

clean:
	rm -rf build build-tsan build-asan build-release build-pip build-venv build-pip-torch2 \
	  build-venv-torch2 build-venv-torch2-wheel
