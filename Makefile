# sandboxd: one non-recursive Makefile.
#
#   make            build/sandboxd and build/sandboxctl (installs Debian deps if missing)
#   make run        build, then run the daemon in the foreground on build/sandboxd.sock
#   make check-house  the house rules: each header names its process, no Lua on the
#                   supervisor's side or in proto/, no include up the folders
#   make test       every stage in TEST_STAGES below, each even when one before it
#                   failed, one at a time (TEST_JOBS=2: two), then a table of
#                   counts and seconds per stage
#   make mutation   the mutation check (its own campaign; CI runs it after make test)
#   make test-systemd  the units under a real systemd in a booted Debian 12
#                   container (root; CI runs it after make test)
#   make test-image the container image and the Kubernetes manifests, run
#                   with podman (root; CI runs it after make test)
#   make asan       the sanitizer build in build/asan/
#   make bench      the benchmark report (bench/); BASE=REV: the A/B against REV (bench/ab)
#   make bench-breakdown  where one trivial execute's time goes, step by step (bench/breakdown)
#   make soak       the reliability faults under load for SOAK_SECONDS (default 300)
#   make fuzz       libFuzzer on the framing, JSON-RPC, codec and bindings (tests/fuzz/)
#
# O is the output directory; SANITIZE=1 builds with ASan+UBSan.  `make test`
# re-invokes this same Makefile with O=build/asan SANITIZE=1 for the second pass.

O        ?= build
SANITIZE ?= 0
PREFIX   ?= /usr/local
DESTDIR  ?=

PKGS     := lua5.3 jansson libseccomp inih
CC       ?= cc
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wwrite-strings -Wundef -Wno-unused-parameter
CFLAGS   ?= -O2 -g
# The release's one version (VERSION); every other copy is checked against
# it by tests/tooling/test_release.py.
VERSION  := $(shell cat VERSION)
CPPFLAGS += -std=c11 -D_GNU_SOURCE -I. -DSANDBOXD_VERSION='"$(VERSION)"' $(PKG_CFLAGS) $(EXTRA_CPPFLAGS)
LDLIBS   += $(PKG_LIBS) -lev -lm
ifeq ($(SANITIZE),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
CPPFLAGS += -DSANDBOXD_SANITIZE=1
else
CPPFLAGS += -DSANDBOXD_SANITIZE=0
endif
ALL_CFLAGS = $(WARN) $(CFLAGS) -MMD -MP

COMMON_SRCS := $(wildcard common/*.c)
PROTO_SRCS  := $(wildcard proto/*.c)
POLICY_SRCS := $(wildcard policy/*.c)
DAEMON_SRCS := $(filter-out daemon/main.c,$(wildcard daemon/*.c))
WORKER_SRCS := $(wildcard worker/*.c)
CLIENT_SRCS := $(wildcard client/*.c)
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)

LIB_OBJS    := $(patsubst %.c,$(O)/obj/%.o,$(COMMON_SRCS) $(PROTO_SRCS) $(POLICY_SRCS) $(DAEMON_SRCS) $(WORKER_SRCS))
CLIENT_OBJS := $(patsubst %.c,$(O)/obj/%.o,$(CLIENT_SRCS))
UNIT_BINS   := $(patsubst tests/unit/%.c,$(O)/tests/%,$(UNIT_SRCS))
UNIT_OBJS   := $(patsubst %.c,$(O)/obj/%.o,$(UNIT_SRCS))
LIB         := $(O)/libsandboxd.a

.PHONY: all deps test-deps run check-house test test-unit test-integration test-systemd test-image test-reliability soak test-hooks test-node test-node18 bench-node test-elixir bench-elixir asan trace bench bench-breakdown mutation fuzz install clean test-precision test-python test-audit test-tooling deb dist test-dist
all: $(O)/sandboxd $(O)/sandboxctl

# The Debian packages first, then pkg-config's flags for them, kept in
# build/config.mk.  It is an included makefile: when it is missing or older
# than scripts/install-deps, make runs this rule before anything else and
# starts over with the flags read from it, so no flag is computed before
# pkg-config and the libraries are there.  `make clean` alone needs neither.
# `make` and `make run` install only the build group; the tests, the
# sanitizer, fuzz, bench and packaging targets the test group (TEST_DEPS),
# before their first command.
# INSTALL_DEPS=true skips the installing where the packages are there by
# other means (debian/rules: the Build-Depends).
DEPS_MK := build/config.mk
TEST_DEPS := build/.test-deps
INSTALL_DEPS ?= scripts/install-deps
deps: $(DEPS_MK)
$(DEPS_MK): scripts/install-deps
	@$(INSTALL_DEPS) build
	@mkdir -p build
	@{ printf 'PKG_CFLAGS := %s\n' "$$(pkg-config --cflags $(PKGS))" && \
	   printf 'PKG_LIBS := %s\n' "$$(pkg-config --libs $(PKGS))"; } > $@.tmp
	@mv $@.tmp $@
ifneq ($(MAKECMDGOALS),clean)
include $(DEPS_MK)
endif
# The same step under the name an order-only prerequisite may give it.
build/.deps: $(DEPS_MK)
	@touch $@
test-deps: $(TEST_DEPS)
$(TEST_DEPS): scripts/install-deps | $(DEPS_MK)
	@$(INSTALL_DEPS) test
	@touch $@
# cmocka is the test group's: its flags are asked for when a unit test is
# linked, after TEST_DEPS installed it (a recursive variable, expanded then).
CMOCKA_LIBS = $(shell pkg-config --libs cmocka)

# The flags each output directory was built with.  When they change (make
# O=build/asan without SANITIZE=1, say), everything in $(O) is rebuilt rather
# than linked from objects compiled with other flags.  EXTRA_CPPFLAGS is left
# out on purpose: the mutation check seeds a mutant's tree with the baseline
# objects and rebuilds only the files its -DMUTATE_* flag touches.
FLAGS_STAMP := $(O)/.flags
FLAGS_NOW   := $(CC) $(filter-out $(EXTRA_CPPFLAGS),$(CPPFLAGS)) $(ALL_CFLAGS) | $(LDFLAGS) | $(LDLIBS)
ifneq ($(wildcard $(DEPS_MK)),)
ifneq ($(FLAGS_NOW),$(shell cat $(FLAGS_STAMP) 2>/dev/null))
$(shell mkdir -p $(O))$(file >$(FLAGS_STAMP),$(FLAGS_NOW))
endif
endif

$(O)/obj/%.o: %.c $(FLAGS_STAMP) | $(DEPS_MK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(O)/sandboxd: $(O)/obj/daemon/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(O)/sandboxctl: $(CLIENT_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The unit tests' objects are kept (not intermediate files make deletes),
# so a second `make test` does not compile them again.
.SECONDARY: $(UNIT_OBJS)
$(UNIT_OBJS): | $(TEST_DEPS)
$(O)/tests/%: $(O)/obj/tests/unit/%.o $(LIB) | $(TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CMOCKA_LIBS)

# The differential test of the worker's library against stock Lua 5.3
# (tests/diff/luadiff.h): its generator and runner, also fuzzed (tests/fuzz).
$(O)/tests/test_luadiff: $(O)/obj/tests/unit/test_luadiff.o $(O)/obj/tests/diff/luadiff.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CMOCKA_LIBS)

# The meter (tests/tools/lua_meter.c): a chunk's instructions, charges and
# peak heap measured with the stock liblua5.3 and the charge module only.
METER_OBJS := $(O)/obj/tests/tools/lua_meter.o $(O)/obj/worker/charge.o \
              $(O)/obj/worker/pattern.o
$(O)/tests/lua_meter: $(METER_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -llua5.3 -lm

# The daemon in the foreground; scripts/run prints where it listens once it
# does, and stops it on Ctrl-C or when the terminal goes away.
run: all
	@scripts/run $(O)

# The test plan's repeated commands, one variable each.  PYTEST runs a
# suite as every stage does; suite_env gives a suite the binaries of the
# build directory $(1) (default $(O)) and says whether they are sanitized.
PYTEST    := /usr/bin/python3 -m pytest -q -p no:cacheprovider
suite_env  = SANDBOXD_BIN=$(CURDIR)/$(or $(1),$(O))/sandboxd \
             SANDBOXCTL_BIN=$(CURDIR)/$(or $(1),$(O))/sandboxctl \
             SANDBOXD_SANITIZE=$(or $(2),$(SANITIZE))

# One pass of the suites against the binaries in $(O).
test-unit: $(UNIT_BINS)
	@rc=0; for t in $(UNIT_BINS); do echo "== $$t"; $$t || rc=1; done; exit $$rc

# Every chunk the suite sends is recorded in $(O)/chunks/ for make test-audit.
test-integration: all $(O)/tests/lua_meter $(TEST_DEPS)
	@mkdir -p $(O)/chunks && rm -f $(O)/chunks/integration.jsonl
	$(suite_env) LUA_METER=$(CURDIR)/$(O)/tests/lua_meter \
	SANDBOXD_RECORD_CHUNKS=$(CURDIR)/$(O)/chunks/integration.jsonl SANDBOXD_SHARDS=$(SHARDS) \
	$(PYTEST) tests/integration

# The precision suite (tests/precision): realistic programs measured under
# stock liblua5.3 by the harness built here (instructions, and the smallest
# heap cap that completes them; cached in tests/precision/needs.json), each
# run at twice its needs and at half of each; the verdicts are in
# build/precision/report.md.
test-precision: all $(TEST_DEPS)
	@mkdir -p $(O)/precision
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -o $(O)/precision/measure tests/precision/measure.c \
	  tests/precision/charges.c worker/charge.c worker/pattern.c \
	  $(LDFLAGS) $(PKG_LIBS) -lm
	$(suite_env) PRECISION_MEASURE=$(CURDIR)/$(O)/precision/measure $(PYTEST) tests/precision

# The Python client (client/python) against the daemon in $(O).
test-python: all $(TEST_DEPS)
	$(suite_env) $(PYTEST) client/python/tests

# A test build with -DSANDBOXD_TEST_HOOKS=1 (never installed): the Lua
# environment gains sandboxd_test.syscall(nr), so a test can make a worker
# issue a forbidden system call (tests/integration/test_hooks.py).
HOOKS_O := build/hooks
test-hooks: $(TEST_DEPS)
	$(MAKE) O=$(HOOKS_O) EXTRA_CPPFLAGS=-DSANDBOXD_TEST_HOOKS=1 all
	$(call suite_env,$(HOOKS_O),0) SANDBOXD_TEST_HOOKS=1 $(PYTEST) tests/integration/test_hooks.py

# The syscall audit (tests/audit, docs/security.md "The syscall audit"): a
# test build with -DSANDBOXD_SYSCALL_AUDIT=1 (never installed) whose worker
# reports a call outside the allowlist and goes on with ENOSYS, plus the test
# hooks for its canary.  It replays every chunk the integration suite sent
# (recorded in build/chunks/ by make test-integration), every .lua file of
# the tree, the precision suite's generated programs and the differential
# test's (test_luadiff), and fails naming each forbidden call and the chunk
# that made it.
AUDIT_O := build/audit
test-audit: $(TEST_DEPS)
	$(MAKE) O=$(AUDIT_O) EXTRA_CPPFLAGS='-DSANDBOXD_SYSCALL_AUDIT=1 -DSANDBOXD_TEST_HOOKS=1' $(AUDIT_O)/sandboxd
	$(MAKE) O=build build/tests/test_luadiff
	$(call suite_env,$(AUDIT_O),0) \
	AUDIT_RECORDINGS=$(CURDIR)/build/chunks AUDIT_LUADIFF=$(CURDIR)/build/tests/test_luadiff \
	$(PYTEST) tests/audit

# sandboxd under a real systemd (tests/systemd): a Debian 12 root built once
# with mmdebstrap (cached in build/systemd/root, rebuilt when
# tests/systemd/packages changes), booted with systemd-nspawn; the units are
# installed and driven as docs/deployment.md tells an operator.  Where the
# container cannot boot here (not root, no systemd-nspawn, no mirror for the
# first build) it says so in one line and passes.  tests/systemd/test_deb.py
# installs, reinstalls, removes and purges the Debian package (make deb) in
# a container of its own.
test-systemd: all deb
	@SANDBOXD_DEB=$(CURDIR)/$(lastword $(wildcard dist/sandboxd_$(VERSION)-*.deb)) tests/systemd/run $(O)

# The image and the manifests (tests/image): deploy/Containerfile built with
# podman from a Debian 12 base made once with mmdebstrap (cached in
# build/image; no registry is contacted), run with each manifest's security
# context, and the manifests played with `podman kube play`.  Where it cannot
# run here (not root, no podman, no mirror for the first build) it says so in
# one line and passes.
test-image: all $(TEST_DEPS)
	@tests/image/run

# The reliability suite (tests/reliability): checked load with faults
# injected and crash loops of the zygote, under two minutes; `make soak` runs
# its faults for SOAK_SECONDS.
SOAK_SECONDS ?= 300
test-reliability: all $(TEST_DEPS)
	$(suite_env) $(PYTEST) tests/reliability

soak: all $(TEST_DEPS)
	$(suite_env) /usr/bin/python3 tests/reliability/soak.py $(SOAK_SECONDS)

# The Node packages with Node's own test runner against the daemon in $(O):
# client/node (the npm package sandboxd), client/mcp (sandboxd-mcp, end to
# end with real MCP servers from npm) and client/mcp/hosts (the bridge under
# the MCP hosts people use); scripts/test-node says what it runs, on which
# Node.  scripts/npm-ci installs each committed lock file, only when
# node_modules is missing or older than the lock, and names the registry
# problem when it cannot.
NODE_SUITES := client/node client/mcp client/mcp/hosts
NODE_DEPS := client/node/node_modules/.package-lock.json client/mcp/node_modules/.package-lock.json client/mcp/hosts/node_modules/.package-lock.json
test-node: all $(TEST_DEPS) $(NODE_DEPS)
	$(MAKE) -C bench loadgen
	@$(suite_env) scripts/test-node $(NODE_SUITES)

# The same suites on Debian 12's Node 18 (the packages say node >= 18): a
# campaign of its own, which CI runs after make test (about 95 s).
test-node18: all $(TEST_DEPS) $(NODE_DEPS)
	@$(suite_env) scripts/test-node --node18 $(NODE_SUITES)

# Tool calls/s through the Node client against the C load generator, and the
# latency execute_lua adds over its two MCP round trips (bench/node_tools.mjs).
bench-node: all $(TEST_DEPS) client/mcp/node_modules/.package-lock.json
	$(MAKE) -C bench loadgen
	node bench/node_tools.mjs --sandboxd $(O)/sandboxd

client/node/node_modules/.package-lock.json: client/node/package-lock.json client/node/package.json | $(TEST_DEPS)
	scripts/npm-ci client/node
	@touch $@
client/mcp/node_modules/.package-lock.json: client/mcp/package-lock.json client/mcp/package.json | $(TEST_DEPS)
	scripts/npm-ci client/mcp
	@touch $@
client/mcp/hosts/node_modules/.package-lock.json: client/mcp/hosts/package-lock.json client/mcp/hosts/package.json | $(TEST_DEPS)
	scripts/npm-ci client/mcp/hosts
	@touch $@

# The house rules (scripts/check-house): every header's first line names
# the process that runs it, nothing in the supervisor or in proto/ includes
# <lua.h> (directly or through a header), no include runs up the folders
# or across processes; tests/house shows that the check catches each.
check-house: $(TEST_DEPS)
	scripts/check-house
	$(PYTEST) tests/house

# make test: each stage is STAGE|BUILD|COMMAND; scripts/test-run runs every
# one even when an earlier one failed, one at a time or TEST_JOBS at once
# (never two on one BUILD, and those of one BUILD in this order),
# keeps each one's output in build/test-logs, and ends with a table of each
# stage's counts and seconds (also in build/test-summary.txt), failing then
# if any stage failed.  The README's `make test` paragraph says what runs on
# which build: keep it in step with this list.  A stage builds what it needs
# in its BUILD's directory only: that is what lets two run at once.
TEST_STAGES := \
  'house rules|-|$(MAKE) check-house' \
  'unit|build|$(MAKE) O=build test-unit' \
  'integration|build|$(MAKE) O=build test-integration' \
  'reliability|build|$(MAKE) O=build test-reliability' \
  'python client|build|$(MAKE) O=build test-python' \
  'unit|build/asan|$(MAKE) O=build/asan SANITIZE=1 test-unit' \
  'integration|build/asan|$(MAKE) O=build/asan SANITIZE=1 test-integration' \
  'python client|build/asan|$(MAKE) O=build/asan SANITIZE=1 test-python' \
  'test hooks|build/hooks|$(MAKE) test-hooks' \
  'syscall audit|build|$(MAKE) test-audit' \
  'node, mcp|build|$(MAKE) O=build test-node' \
  'elixir client|build|$(MAKE) O=build test-elixir' \
  'elixir client|build/asan|$(MAKE) O=build/asan SANITIZE=1 test-elixir' \
  'bench smoke|build|$(MAKE) -C bench O=$(CURDIR)/build smoke' \
  'fuzz, 5 s a target|build/fuzz|FUZZ_JOBS=2 tests/fuzz/run.sh 5' \
  'precision|build|$(MAKE) O=build test-precision' \
  'tooling, README|build|$(MAKE) O=build test-tooling'
test: $(TEST_DEPS)
	+@exec scripts/test-run --summary build/test-summary.txt --logs build/test-logs $(TEST_STAGES)

# The tests of make test's own machinery (tests/tooling: its runner,
# scripts/npm-ci's messages, the bench smoke where bubblewrap cannot run,
# suites in a terminal) and of every command and example in the README,
# run against the real daemon (tests/readme).
test-tooling: all $(TEST_DEPS)
	$(MAKE) -C bench loadgen inproc
	$(suite_env) $(PYTEST) tests/tooling tests/readme

# The Elixir client and Legion adapter (client/elixir) against the daemon in
# $(O): ExUnit, offline (the mix project has no dependencies, so no Hex).  A
# sanitizer report in a daemon's log fails the run.
test-elixir: all $(TEST_DEPS)
	cd client/elixir && $(suite_env) MIX_ENV=test HEX_OFFLINE=1 \
	MIX_BUILD_ROOT=$(CURDIR)/$(O)/elixir mix test

# What Sandboxd.Legion adds to the daemon's latency for an execute with one
# tool call, against a C client in the same run (bench/elixir_legion.exs).
bench-elixir: all $(TEST_DEPS)
	cd client/elixir && $(suite_env) MIX_ENV=test HEX_OFFLINE=1 \
	MIX_BUILD_ROOT=$(CURDIR)/$(O)/elixir mix run ../../bench/elixir_legion.exs

asan: $(TEST_DEPS)
	$(MAKE) O=build/asan SANITIZE=1 all

# A bench build with -DSANDBOXD_BENCH_TRACE=1 (never installed): every answer
# carries the timestamps of its execution's steps (common/trace.h), which
# bench/breakdown turns into the time of each step beside its floor.
TRACE_O := build/trace
trace: $(TEST_DEPS)
	$(MAKE) O=$(TRACE_O) EXTRA_CPPFLAGS=-DSANDBOXD_BENCH_TRACE=1 all

bench-breakdown: trace
	$(MAKE) -C bench O=$(CURDIR)/$(TRACE_O) run-breakdown

bench: all $(TEST_DEPS)
	$(MAKE) -C bench O=$(CURDIR)/$(O)

# Coverage-guided fuzzing of the parsers that see hostile bytes (tests/fuzz/):
# FUZZ_SECONDS per target.  make test runs a 5-second pass of each.
FUZZ_SECONDS ?= 60
fuzz: $(TEST_DEPS)
	FUZZ_JOBS=2 tests/fuzz/run.sh $(FUZZ_SECONDS)

# The mutation check: each hardening piece switched off in turn (a test-only
# -DMUTATE_* build in build/mutate/NAME) must make some test fail.
mutation: $(TEST_DEPS)
	tests/mutation/run

# The release's artefacts (scripts/dist): make deb the Debian package,
# make dist every artefact with SHA256SUMS, all in dist/.
deb: $(TEST_DEPS)
	scripts/dist deb

dist: $(TEST_DEPS)
	scripts/dist all

# Every artefact of make dist tested from the artefact (tests/dist): the
# client packages installed into a virtual environment and new npm
# projects, their README examples run against the packaged daemon.
test-dist: dist
	$(PYTEST) tests/dist

install: all
	O=$(O) PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) scripts/install

clean:
	rm -rf build dist

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
