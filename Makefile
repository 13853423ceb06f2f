# The developer loop of v6d-go. `make` (or `make help`) lists the targets;
# `make test` is exactly what CI runs (.ci/run).
#
# Outputs go to build/: build/vineyardd, build/libv6d.so, build/tests/ (C test
# programs, built by the pytest suite), build/cgocheck2/libv6d.so, and the
# project's Python environment build/venv. Go's build cache makes the Go
# targets incremental, so they are all .PHONY.
#
# Every Python step runs in build/venv, made from requirements-dev.txt by the
# BASE interpreter of $(PYTHON) (sys._base_executable: the same venv whether
# or not the caller is inside another one) and remade when that file changes.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

GO        ?= go
PYTHON    ?= python3
ifeq ($(origin CC),default)
CC        := gcc
endif
ifeq ($(origin CXX),default)
CXX       := g++
endif
export CC CXX

PREFIX    ?= /usr/local
DESTDIR   ?=
# The one place the version is written: VERSION. The daemon and libv6d get it
# through -ldflags -X, v6d.pc through sed, Python through package metadata.
VERSION   := $(shell cat $(CURDIR)/VERSION)
FUZZTIME  ?= 20s
BENCH_ARGS ?=
PYTEST_ARGS ?=
GOTEST_FLAGS ?=

BUILD     := build
LIB       := $(BUILD)/libv6d.so
DAEMON    := $(BUILD)/vineyardd
CTL       := $(BUILD)/vineyardctl
ETCD      := $(BUILD)/v6d-etcd
HEADER    := include/v6d.h
# The Python package's fast path: exported by the library, never installed,
# no stability promise (its comment; v6d.h, "ABI versioning").
INTERNAL_HEADER := include/v6d_internal.h

# Only v6d_* is exported (libv6d/v6d.map); the soname lets `-lv6d` users find
# the library by name. The quotes matter: -extldflags takes one word.
VERSION_LDFLAGS := -X main.version=$(VERSION) -X github.com/v6d-io/v6d-go/internal/client.Version=$(VERSION)
LIB_LDFLAGS := -s -w $(VERSION_LDFLAGS) \
  '-extldflags=-Wl,--version-script=$(CURDIR)/libv6d/v6d.map -Wl,-soname,libv6d.so'
DAEMON_LDFLAGS := $(VERSION_LDFLAGS)

# Pinned golangci-lint (tools/go.mod); built once into Go's cache.
GOLANGCI_LINT := $(GO) tool -modfile=tools/go.mod golangci-lint

# The project's Python environment. VENV_PY runs every Python step; PY_ENV puts
# the venv first on PATH (subprocesses that run `python3` get it too).
VENV       := $(BUILD)/venv
VENV_PY    := $(CURDIR)/$(VENV)/bin/python
VENV_STAMP := $(VENV)/.requirements-dev.stamp
TORCH_STAMP := $(VENV)/.requirements-torch.stamp
JAX_STAMP  := $(VENV)/.requirements-jax.stamp
TF_STAMP   := $(VENV)/.requirements-tensorflow.stamp
DASK_STAMP := $(VENV)/.requirements-dask.stamp
BASE_PYTHON = $(shell $(PYTHON) -c 'import sys; print(getattr(sys, "_base_executable", "") or sys.executable)' 2>/dev/null)
# WITH_TORCH=1: also install the pinned torch (requirements-torch.txt) so that
# tests/python/test_torch.py runs instead of skipping.
# WITH_JAX=1 and WITH_TF=1 do the same for JAX (requirements-jax.txt) and
# TensorFlow (requirements-tensorflow.txt), for tests/python/test_dlpack.py.
# dask and distributed (requirements-dask.txt: vineyard.contrib.dask's tests)
# always go in, after requirements-dev.txt, constrained by it.
VENV_DEP := $(VENV_STAMP) $(DASK_STAMP) $(if $(WITH_TORCH),$(TORCH_STAMP)) $(if $(WITH_JAX),$(JAX_STAMP)) $(if $(WITH_TF),$(TF_STAMP))

# The environment every Python test and benchmark runs in.
PY_ENV := VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" \
  V6D_LIBRARY=$(CURDIR)/$(LIB) VINEYARDD=$(CURDIR)/$(DAEMON) VINEYARDCTL=$(CURDIR)/$(CTL) V6D_ETCD=$(CURDIR)/$(ETCD) \
  PYTHONPATH=$(CURDIR)/python

# Targets that need the artifacts build them first, unless NO_BUILD=1 (make
# test builds once, then runs its checks with NO_BUILD=1).
BUILD_DEP := $(if $(NO_BUILD),,build)

# run-all NAME, TARGETS: run every target even if one fails, then print a
# summary and fail if any did.
define run-all
	@passed=0; failed=""; \
	for t in $(2); do \
	  printf '\n==> make %s\n' "$$t"; \
	  if $(MAKE) --no-print-directory $$t NO_BUILD=1; then passed=$$((passed+1)); \
	  else failed="$$failed $$t"; fi; \
	done; \
	echo; \
	if [ -n "$$failed" ]; then echo "$(1) FAILED:$$failed"; fi; \
	echo "$(1): $$passed passed, $$(echo $$failed | wc -w) failed"; \
	[ -z "$$failed" ]
endef

.PHONY: help build lib daemon ctl image-binaries test-image test-helm etcd-helper cluster-demo bench-cluster lib-cgocheck2 check venv venv-torch venv-jax venv-tensorflow test test-go vet test-python test-accel-off test-interop test-upstream-suite \
	test-cgocheck2 test-arrow-cgocheck2 check-header check-symbols test-install lint lint-go \
	lint-fmt lint-python fmt fuzz bench bench-smoke bench-go bench-transfer bench-streams demo install uninstall clean

help: ## Show this list of targets
	@echo "Usage: make TARGET [VARIABLE=value ...]"
	@echo
	@awk 'BEGIN { FS = ":.*## " } \
	  /^##@ / { printf "\n%s:\n", substr($$0, 5); next } \
	  /^[a-zA-Z0-9_-]+:.*## / { printf "  %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo
	@echo "Variables: PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) VERSION=$(VERSION) PYTHON=$(PYTHON) WITH_TORCH=$(WITH_TORCH)"
	@echo "           FUZZTIME=$(FUZZTIME) BENCH_ARGS=$(BENCH_ARGS) PYTEST_ARGS=$(PYTEST_ARGS) GOTEST_FLAGS=$(GOTEST_FLAGS)"

##@ Build

build: daemon lib etcd-helper ctl ## Build build/vineyardd, build/libv6d.so, build/vineyardctl and build/v6d-etcd (the test etcd)

daemon: ## Build the daemon, build/vineyardd
	@mkdir -p $(BUILD)
	$(GO) build -ldflags "$(DAEMON_LDFLAGS)" -o $(DAEMON) ./cmd/vineyardd

# vineyardctl needs no cgo: a static binary, as in the container image.
ctl: ## Build the command-line client, build/vineyardctl (static)
	@mkdir -p $(BUILD)
	CGO_ENABLED=0 $(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(CTL) ./cmd/vineyardctl

# The container image's binaries (Dockerfile): static, stripped, no cgo.
IMAGE_BIN := $(BUILD)/image
image-binaries: ## Build the container image's static vineyardd and vineyardctl into build/image/
	@mkdir -p $(IMAGE_BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o $(IMAGE_BIN)/vineyardd ./cmd/vineyardd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o $(IMAGE_BIN)/vineyardctl ./cmd/vineyardctl

etcd-helper: ## Build build/v6d-etcd, a one-member etcd for the cluster tests and make cluster-demo
	@mkdir -p $(BUILD)
	$(GO) build -o $(ETCD) ./cmd/v6d-etcd

# Go decides whether to relink from the flags, not from the content of the
# version script, so a changed v6d.map must remove the old library first.
lib: ## Build the C library build/libv6d.so (c-shared, exports only v6d_*)
	@mkdir -p $(BUILD)
	@if [ libv6d/v6d.map -nt $(LIB) ]; then rm -f $(LIB); fi
	status=0; CGO_ENABLED=1 $(GO) build -buildmode=c-shared -ldflags "$(LIB_LDFLAGS)" \
	  -o $(LIB) ./libv6d || status=$$?; rm -f $(BUILD)/libv6d.h; exit $$status

lib-cgocheck2: ## Build build/cgocheck2/libv6d.so with GOEXPERIMENT=cgocheck2
	@mkdir -p $(BUILD)/cgocheck2
	@if [ libv6d/v6d.map -nt $(BUILD)/cgocheck2/libv6d.so ]; then rm -f $(BUILD)/cgocheck2/libv6d.so; fi
	status=0; GOEXPERIMENT=cgocheck2 CGO_ENABLED=1 $(GO) build -buildmode=c-shared \
	  -ldflags "$(LIB_LDFLAGS)" -o $(BUILD)/cgocheck2/libv6d.so ./libv6d || status=$$?; \
	  rm -f $(BUILD)/cgocheck2/libv6d.h; exit $$status

##@ Set-up

check: ## Check the prerequisites (go, gcc, python3 >= 3.11 with venv, pkg-config); say how to install what is missing
	@PYTHON="$(PYTHON)" GO="$(GO)" scripts/check-prereqs.sh

venv: $(VENV_DEP) ## Make build/venv from requirements-dev.txt (remade when it changes; WITH_TORCH=1 adds torch)

venv-torch: $(TORCH_STAMP) ## Add the pinned torch (requirements-torch.txt) to build/venv, for tests/python/test_torch.py

venv-jax: $(JAX_STAMP) ## Add the pinned JAX on CPU (requirements-jax.txt) to build/venv, for tests/python/test_dlpack.py

venv-tensorflow: $(TF_STAMP) ## Add the pinned tensorflow-cpu (requirements-tensorflow.txt) to build/venv, for tests/python/test_dlpack.py

# The stamp holds the requirements it was made from: a changed file remakes
# the venv from scratch (--clear), so nothing stale stays installed.
$(VENV_STAMP): requirements-dev.txt
	@if [ -x $(VENV_PY) ] && cmp -s requirements-dev.txt $(VENV_STAMP); then touch $(VENV_STAMP); exit 0; fi; \
	base="$(BASE_PYTHON)"; \
	if [ -z "$$base" ]; then echo "venv: '$(PYTHON)' does not run; run 'make check'" >&2; exit 1; fi; \
	echo "venv: making $(VENV) with $$base from requirements-dev.txt"; \
	rm -f $(VENV_STAMP) $(TORCH_STAMP) $(JAX_STAMP) $(TF_STAMP) $(DASK_STAMP); \
	"$$base" -m venv --clear $(VENV) || { echo "venv: '$$base -m venv' failed; run 'make check' for what to install" >&2; exit 1; }; \
	$(VENV_PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt || \
	  { echo "venv: pip install -r requirements-dev.txt failed (network? see above); rerun 'make venv'" >&2; exit 1; }; \
	cp requirements-dev.txt $(VENV_STAMP)

$(DASK_STAMP): requirements-dask.txt $(VENV_STAMP)
	@echo "venv: installing dask and distributed into $(VENV) (requirements-dask.txt)"
	$(VENV_PY) -m pip install --disable-pip-version-check -q -c requirements-dev.txt -r requirements-dask.txt
	@cp requirements-dask.txt $(DASK_STAMP)

$(TORCH_STAMP): requirements-torch.txt $(VENV_STAMP)
	@echo "venv: installing torch into $(VENV) (requirements-torch.txt; large download)"
	$(VENV_PY) -m pip install --disable-pip-version-check -q -c requirements-dev.txt -r requirements-torch.txt
	@cp requirements-torch.txt $(TORCH_STAMP)

$(JAX_STAMP): requirements-jax.txt $(VENV_STAMP)
	@echo "venv: installing JAX into $(VENV) (requirements-jax.txt)"
	$(VENV_PY) -m pip install --disable-pip-version-check -q -c requirements-dev.txt -r requirements-jax.txt
	@cp requirements-jax.txt $(JAX_STAMP)

$(TF_STAMP): requirements-tensorflow.txt $(VENV_STAMP)
	@echo "venv: installing tensorflow-cpu into $(VENV) (requirements-tensorflow.txt; large download)"
	$(VENV_PY) -m pip install --disable-pip-version-check -q -c requirements-dev.txt -r requirements-tensorflow.txt
	@cp requirements-tensorflow.txt $(TF_STAMP)

##@ Test

test: check build venv ## Check prerequisites, build, make the venv, then vet, go test -race, header/symbol/install checks, pytest, Arrow under cgocheck2, bench smoke (what CI runs)
	$(call run-all,make test,vet test-go check-header check-symbols test-install test-image test-helm test-python test-accel-off test-interop test-upstream-suite test-arrow-cgocheck2 bench-smoke)

vet: ## go vet ./...
	$(GO) vet ./...

test-go: ## Go tests with the race detector: go test -race ./...
	CGO_ENABLED=1 $(GO) test -race $(GOTEST_FLAGS) ./...

test-python: $(BUILD_DEP) $(VENV_DEP) ## pytest tests/ (in build/venv) against build/libv6d.so and build/vineyardd
	@test -d tests || { echo "test-python: no tests/ directory" >&2; exit 1; }
	status=0; $(PY_ENV) $(VENV_PY) -m pytest tests -q --ignore=tests/interop $(PYTEST_ARGS) || status=$$?; \
	  if [ $$status -eq 5 ]; then echo "test-python: pytest collected no tests" >&2; fi; \
	  exit $$status

# The client's fast paths are accelerators of the plain protocol, each of
# which may decline (internal/client/accel.go): with every one off
# (V6D_ACCEL=none), the client's Go tests and the Python tests of puts, gets,
# deletes, names, Arrow and pandas must pass on the plain protocol alone.
# Tests of an accelerator itself skip when it is off.
ACCEL_OFF_PYTHON := tests/python/test_client.py tests/python/test_put_small_array.py tests/python/test_get_plan.py \
  tests/python/test_get_into.py tests/python/test_arrow.py tests/python/test_pandas.py tests/python/test_trees.py
test-accel-off: $(BUILD_DEP) $(VENV_DEP) ## go test (client, arrowc) and the put/get/delete/names/Arrow/pandas pytest files with every client accelerator off (V6D_ACCEL=none)
	V6D_ACCEL=none CGO_ENABLED=1 $(GO) test -race $(GOTEST_FLAGS) ./internal/client/ ./internal/arrowc/
	$(PY_ENV) V6D_ACCEL=none $(VENV_PY) -m pytest $(ACCEL_OFF_PYTHON) -q $(PYTEST_ARGS)

test-interop: $(BUILD_DEP) $(VENV_DEP) ## pytest tests/interop: upstream Vineyard 0.24.2 (its venv made once under build/bench) and ours, both ways
	$(PY_ENV) $(VENV_PY) -m pytest tests/interop -q $(PYTEST_ARGS)

# Upstream's own tests from its pinned wheel (the venv of test-interop),
# unchanged, one file and one fresh daemon (or etcd and two, for the cluster
# files) at a time, against ours and, as the control, against upstream's own
# package and daemon; the failures allowed are listed with their reasons in
# tests/upstream/expected-failures.txt.
UPSTREAM_SUITE_ARGS ?=
test-upstream-suite: $(BUILD_DEP) $(VENV_DEP) ## Upstream Vineyard 0.24.2's own Python tests against ours and upstream's (tests/upstream; UPSTREAM_SUITE_ARGS="-k FILE -v --no-control --no-cluster")
	$(PY_ENV) $(VENV_PY) tests/upstream/run.py $(UPSTREAM_SUITE_ARGS)

test-cgocheck2: lib-cgocheck2 $(BUILD_DEP) $(VENV_DEP) ## pytest against the cgocheck2 build (pointer-passing violations crash)
	$(PY_ENV) V6D_LIBRARY=$(CURDIR)/$(BUILD)/cgocheck2/libv6d.so $(VENV_PY) -m pytest tests -q --ignore=tests/interop $(PYTEST_ARGS)

# The Arrow exports hand C pointers to what Go built: a Go-heap buffer among
# them aborts a cgocheck2 build ("unpinned Go pointer stored into non-Go memory").
test-arrow-cgocheck2: lib-cgocheck2 $(BUILD_DEP) $(VENV_DEP) ## The Arrow tests (Python and C) against the cgocheck2 build
	$(PY_ENV) V6D_LIBRARY=$(CURDIR)/$(BUILD)/cgocheck2/libv6d.so $(VENV_PY) -m pytest tests/python/test_arrow.py tests/c/test_arrow_c.py -q $(PYTEST_ARGS)

check-header: ## Compile include/v6d.h (and v6d_internal.h) as C11 -pedantic and C++17, -Wall -Wextra -Werror
	scripts/check-header.sh $(HEADER)
	scripts/check-header.sh $(INTERNAL_HEADER)

check-symbols: $(if $(NO_BUILD),,lib) ## Check libv6d.so exports exactly the v6d_* of v6d.h and v6d_internal.h, and that a wrong export signature fails to build
	scripts/check-symbols.sh $(LIB) $(HEADER) $(INTERNAL_HEADER)
	GO="$(GO)" scripts/check-abi-shim.sh libv6d

# No Docker engine here: the image's file system (deploy/docker/rootfs.sh,
# which the Dockerfile runs too) is checked by running the daemon chrooted into it.
test-image: image-binaries $(if $(NO_BUILD),,ctl) ## The container image's contents suffice: vineyardd + vineyardctl in an empty root (no libraries, no /dev/shm), as uid 65532, put/get (root)
	scripts/test-image-root.sh $(IMAGE_BIN)

# The chart's test is a Go module of its own (deploy/helm/test/go.mod), so
# that Helm and the Kubernetes API stay out of the project's go.mod.
test-helm: $(if $(NO_BUILD),,daemon) ## Lint and render deploy/helm/vineyard with Helm's Go packages; decode every object strictly into the Kubernetes types, defaults and each option
	cd deploy/helm/test && VINEYARDD=$(CURDIR)/$(DAEMON) $(GO) test -count=1 ./...

test-install: $(BUILD_DEP) ## The README's C example and examples/c from the tree, after install to a temp PREFIX and to DESTDIR/usr/local
	MAKE="$(MAKE)" scripts/test-install.sh

.PHONY: soak
soak: $(BUILD_DEP) $(VENV_DEP) ## A bounded soak (SOAK_SECONDS=120): workers put/get/delete/persist/name against build/vineyardd (invariants checked each second), checksums checked
	$(PY_ENV) $(VENV_PY) scripts/soak.py --seconds $(or $(SOAK_SECONDS),120) --daemon $(DAEMON)

##@ Lint

lint: ## golangci-lint (pinned), gofmt -l, ruff and mypy
	$(call run-all,make lint,lint-go lint-fmt lint-python)

lint-go: ## golangci-lint run ./... (version pinned in tools/go.mod)
	$(GOLANGCI_LINT) run ./...

lint-fmt: ## Fail if gofmt would change any Go file
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path './build/*' \
	  -not -path '*/testdata/*' -not -path './python/*'); \
	out=$$(gofmt -l $$files); \
	if [ -n "$$out" ]; then echo "gofmt -l: not formatted (run 'make fmt'):"; echo "$$out"; exit 1; fi; \
	echo "gofmt: ok"

lint-python: $(VENV_DEP) ## ruff check and mypy on python/vineyard (tools from requirements-dev.txt, in build/venv)
	@if [ ! -d python/vineyard ]; then echo "lint-python: python/vineyard does not exist"; exit 1; fi
	$(VENV_PY) -m ruff check python $(wildcard tests benchmarks examples setup.py)
	$(VENV_PY) -m mypy python/vineyard

fmt: $(VENV_DEP) ## Format Go code (gofmt -s, goimports via golangci-lint fmt) and Python (ruff format)
	$(GOLANGCI_LINT) fmt ./...
	$(VENV_PY) -m ruff format python $(wildcard tests benchmarks setup.py)

##@ Fuzz and bench

fuzz: ## Run every Fuzz* target of every package for FUZZTIME each
	@targets=$$($(GO) test -list 'Fuzz.*' ./... | awk ' \
	  /^Fuzz/ { names[++n] = $$1; next } \
	  /^ok[ \t]/ { for (i = 1; i <= n; i++) print $$2 " " names[i]; n = 0 }'); \
	if [ -z "$$targets" ]; then echo "fuzz: no Fuzz* targets found"; exit 1; fi; \
	count=$$(echo "$$targets" | wc -l); echo "fuzz: $$count targets, $(FUZZTIME) each"; \
	echo "$$targets" | while read -r pkg name; do \
	  echo "==> $$pkg $$name"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg </dev/null; \
	done

bench: $(VENV_DEP) ## Benchmark ours against baselines and peers (BENCH_ARGS=--quick: < 2 min), then the cluster figures (bench-cluster, bench-transfer); see docs/performance.md
	@$(MAKE) --no-print-directory build
	$(PY_ENV) $(VENV_PY) benchmarks/run.py $(BENCH_ARGS)
	@$(MAKE) --no-print-directory bench-cluster bench-transfer bench-spill bench-streams NO_BUILD=1

bench-transfer: ## Remote (TCP) put/get, daemon-to-daemon fetch and migrate (client API), 1 MiB..1 GiB, against memcpy and a raw loopback TCP copy in the same run
	$(GO) test -run '^$$' -bench 'Remote/.*/1MiB$$' -benchtime 300x ./internal/client
	$(GO) test -run '^$$' -bench 'Remote/.*/16MiB$$' -benchtime 40x ./internal/client
	$(GO) test -run '^$$' -bench 'Remote/.*/(256|1024)MiB$$' -benchtime 3x ./internal/client
	$(GO) test -run '^$$' -bench 'Fetch$$/(1MiB|64MiB)/' -benchtime 20x ./internal/peer
	$(GO) test -run '^$$' -bench 'Fetch$$/1GiB/' -benchtime 3x ./internal/peer
	$(GO) test -run '^$$' -bench 'FetchSmall' ./internal/peer
	$(GO) test -run '^$$' -bench 'Migrate$$/(1MiB|64MiB)/' -benchtime 20x ./internal/server
	$(GO) test -run '^$$' -bench 'Migrate$$/1GiB/' -benchtime 3x ./internal/server
	$(GO) test -run '^$$' -bench 'MigrateCold' -benchtime 3x ./internal/server
	$(GO) test -run '^$$' -bench 'MigrateSmall' ./internal/server

bench-spill: $(BUILD_DEP) $(VENV_DEP) ## Spilling: evict and get of a spilled 256 MiB array against file write/read in the same directory, 4x the arena end to end against Ray
	$(PY_ENV) $(VENV_PY) benchmarks/spill.py $(if $(filter --quick,$(BENCH_ARGS)),--quick)

bench-streams: $(BUILD_DEP) $(VENV_DEP) ## Streams: small-chunk push-to-pull latency against a socket round trip, 4 MiB chunks against memcpy, mp.Queue and Ray
	$(PY_ENV) $(VENV_PY) benchmarks/streams.py $(if $(filter --quick,$(BENCH_ARGS)),--quick)

bench-smoke: $(BUILD_DEP) $(VENV_DEP) ## The benchmark harness in smoke mode: every figure of ours, a few iterations, no peers
	$(PY_ENV) $(VENV_PY) benchmarks/run.py --smoke

bench-cluster: $(BUILD_DEP) $(VENV_DEP) ## Cluster figures: persist latency, time until another daemon sees it, list of 10,000 persisted objects
	$(PY_ENV) $(VENV_PY) benchmarks/cluster.py

bench-go: ## Go micro-benchmarks of every package (go test -bench . -benchmem)
	$(GO) test -run '^$$' -bench . -benchmem ./...

##@ Demo, install

demo: build ## Start a daemon on a temp socket, put bytes from one process, get them in another
	scripts/demo.sh

cluster-demo: build $(VENV_DEP) ## Start etcd and three daemons (--meta etcd), persist an object on one, find it from another
	$(PY_ENV) scripts/cluster-demo.sh

# Only the public header: $(INTERNAL_HEADER) stays in the tree (test-install checks).
install: $(BUILD_DEP) ## Install lib, header, v6d.pc, daemon and vineyardctl into DESTDIR/PREFIX
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libv6d.so
	install -m 0644 $(HEADER) $(DESTDIR)$(PREFIX)/include/v6d.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' libv6d/v6d.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/v6d.pc
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/pkgconfig/v6d.pc
	install -m 0755 $(DAEMON) $(DESTDIR)$(PREFIX)/bin/vineyardd
	install -m 0755 $(CTL) $(DESTDIR)$(PREFIX)/bin/vineyardctl
	@# The dynamic loader's cache must learn the new library (README: "From C").
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; \
	elif [ -z "$(DESTDIR)" ]; then echo "install: run 'sudo ldconfig' (or link with -Wl,-rpath,$(PREFIX)/lib)"; fi

uninstall: ## Remove what install put into DESTDIR/PREFIX
	rm -f $(DESTDIR)$(PREFIX)/lib/libv6d.so $(DESTDIR)$(PREFIX)/include/v6d.h \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/v6d.pc $(DESTDIR)$(PREFIX)/bin/vineyardd \
	  $(DESTDIR)$(PREFIX)/bin/vineyardctl

clean: ## Remove build/ and the artifacts copied into python/vineyard
	rm -rf $(BUILD) dist python/vineyard/libv6d.so python/vineyard/bin
	find . -path ./.git -prune -o -type d \( -name '*.egg-info' -o -name __pycache__ \) -prune \
	  -exec rm -rf {} +
