# esm developer and CI entry points. "make test" is what .ci/run runs.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

GO ?= go
EMULATORS := scripts/emulators.sh
EMULATORS_ENV := .emulators/env

.PHONY: test test-unit emulators-up emulators-down ddb-local build demo demo-efo demo-ddb bench latency sim fuzz chaos

# test starts the emulators, runs vet and the full test suite against them,
# and always stops the emulators again (on failure and on Ctrl-C too). It
# exits with the status of the first step that failed.
test:
	@trap 'bash $(EMULATORS) stop' EXIT; \
	bash $(EMULATORS) start; \
	source $(EMULATORS_ENV); \
	$(GO) vet ./...; \
	$(GO) test -race -count=1 -timeout 20m ./... && \
	$(call FAKE_TEST,-race -timeout 10m) && \
	$(MAKE) --no-print-directory image && \
	$(call DEPLOY_TEST,-timeout 10m)

# test-unit runs the short tests of the packages whose tests need no emulator (no node on PATH
# needed, under a minute); the packages listed in EMULATOR_PKGS start kinesis-local or dynalite
# in their TestMain and run in "make test" only.
EMULATOR_PKGS := /cmd/demo$$|/cmd/esm$$|/dlq$$|/e2e/rie$$|/esmapi$$|/handler$$|/handler/inproc$$|/internal/testbed/chaos$$|/internal/testbed/e2e$$|/lease$$|/internal/testbed/local$$
test-unit:
	$(GO) test -short -count=1 $$($(GO) list ./... | grep -vE '$(EMULATOR_PKGS)') && \
	$(call FAKE_TEST,-short) && \
	$(call DEPLOY_TEST,-short)

# FAKE_TEST vets and tests the in-memory fakes, a module of their own (fake/: users import them
# without esm's dependencies), which "go test ./..." of the main module does not reach; the
# caller passes more go test flags. Their comparison with dynalite is internal/testbed/fakeparity's.
FAKE_TEST = (cd fake && $(GO) vet ./... && $(GO) test -count=1 $(1) ./...)

# DEPLOY_TEST vets and tests the deployment module (deploy/: helm's and go-containerregistry's
# dependencies stay out of esm's), which "go test ./..." of the main module does not reach: the
# image builder, the Helm chart (lint, strict rendering, and its pod run from the image make image
# built, as root: ESM_REQUIRE_POD=1 makes a run without root fail), the manifest, the dashboard
# and the alerts; the caller passes more go test flags (-short skips the pod).
DEPLOY_TEST = (cd deploy && $(GO) vet ./... && $(GO) test -count=1 $(1) ./...)

# sim runs the deterministic simulation (internal/testbed/sim) over SEEDS seeds from FROM, or replays
# one with SEED=<n>, and reports seeds per second, the invariants judged and the faults injected.
# LEASES=1 adds schedules with several workers on lease.Dynamo over fake/fakedynamo. Each seed also
# runs its DynamoDB Streams schedule (TestDynamoDBSimulation).
SEEDS ?= 300
FROM ?= 1
SEED ?=
LEASES ?=
sim:
	ESM_SIM_SEEDS=$(SEEDS) ESM_SIM_FROM=$(FROM) ESM_SIM_SEED=$(SEED) ESM_SIM_LEASES=$(LEASES) \
		$(GO) test -count=1 -timeout 60m -run '^(TestSimulation|TestDynamoDBSimulation)$$' -v ./internal/testbed/sim/ | grep -v '^=== RUN'

# chaos runs esm workers as processes on kinesis-local and dynalite, each through its own fault
# proxy (5xx, throttles, dropped connections, partitions from DynamoDB, Kinesis or its function),
# killed, paused past their lease and stopped, while the stream is split, merged and rescaled;
# then prints the faults injected and every verdict. SEEDS seeds from FROM, DURATION of load and
# faults each (default 10 seeds of 60s), WORKERS processes; FLAGS are more "esm run" flags, LOGS
# keeps the workers' logs and each seed's invocations. SOURCE=dynamodb runs the same on a
# DynamoDB table's stream (NEW_AND_OLD_IMAGES, every kind of write) served by a private ddb-local
# whose shards rotate every 3 s, in place of resharding; the lease table stays on dynalite. "make
# test" runs one Kinesis seed of 25s and one DynamoDB seed of 15s.
DURATION ?= 60s
WORKERS ?= 3
FLAGS ?=
LOGS ?=
SOURCE ?= kinesis
chaos: node_modules/.package-lock.json
	ESM_CHAOS_SEEDS=$(if $(filter file,$(origin SEEDS)),10,$(SEEDS)) ESM_CHAOS_FROM=$(FROM) ESM_CHAOS_DURATION=$(DURATION) ESM_CHAOS_WORKERS=$(WORKERS) \
		ESM_CHAOS_FLAGS='$(FLAGS)' ESM_CHAOS_LOGS='$(LOGS)' ESM_CHAOS_SOURCE='$(SOURCE)' \
		$(GO) test -count=1 -timeout 0 -run '^TestChaos$$' -v ./internal/testbed/chaos/ | grep -v -e '^=== RUN' -e '^\s*$$'

# fuzz runs every fuzz target of the module (template parser, filters, event encoder, the API's
# request decoding and SigV4 check, the on-failure message parser, ...: each "func FuzzX") for
# FUZZTIME each, one after another, and prints each target's executions and time. A failing input
# is kept by go test under the package's testdata/fuzz/, replayed by every later go test: commit it
# with the fix. CI runs it with FUZZTIME=3s.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash scripts/fuzz.sh

# emulators-up starts kinesis-local, dynalite and ddb-local (built from fake/) in the background and writes
# their endpoints to .emulators/env; "source .emulators/env" in a shell to use
# them from go test.
emulators-up:
	@bash $(EMULATORS) start

emulators-down:
	@bash $(EMULATORS) stop

# ddb-local runs esm's own DynamoDB with DynamoDB Streams (fake/cmd/ddb-local) in the foreground
# on 127.0.0.1:DDB_PORT, its stream shards rotating every ROTATE (4h, as on AWS; seconds to watch
# children appear), for trying esm on a table's stream by hand. Ctrl-C stops it; state is in memory.
DDB_PORT ?= 14571
ROTATE ?= 4h
ddb-local:
	cd fake && $(GO) run ./cmd/ddb-local -port $(DDB_PORT) -rotate $(ROTATE)

# VERSION is what "esm version" prints and the image's tag: git describe of the checkout
# (-dirty when it has uncommitted changes); REVISION its commit; SOURCE_DATE_EPOCH the commit's
# time, the date of every file and of the image's configuration.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
LDFLAGS := -X main.version=$(VERSION)

# build compiles the esm binary into bin/, its version stamped from git.
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/esm ./cmd/esm

.PHONY: image

# image builds esm's OCI image for linux/amd64 and linux/arm64 without a container daemon or a
# registry (deploy/cmd/esm-image, go-containerregistry): static binaries (CGO_ENABLED=0,
# -trimpath, stripped, the version stamped), the nonroot user 65532, the CA roots x509roots
# ships, OCI labels. It writes the OCI layout bin/image/oci (crane push, skopeo copy oci:) and
# bin/image/esm-linux-ARCH.tar (docker load, podman load), and prints the index's digest: the
# same commit gives the same digest.
IMAGE_ARCHS := amd64 arm64
image:
	for arch in $(IMAGE_ARCHS); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags '-s -w $(LDFLAGS)' \
			-o bin/linux-$$arch/esm ./cmd/esm; \
	done
	cd deploy && $(GO) run ./cmd/esm-image $(foreach a,$(IMAGE_ARCHS),-esm $(a)=../bin/linux-$(a)/esm) \
		-version '$(VERSION)' -revision '$(REVISION)' -created '$(SOURCE_DATE_EPOCH)' \
		-layout ../bin/image/oci -tarballs ../bin/image

.PHONY: function-image

# function-image builds an image from esm's (make image first) with a Lambda bootstrap added as
# /var/task/bootstrap, for the chart's function.exec: FUNCTION_BOOTSTRAP is the bootstrap's path
# with % for the architecture (default bin/bootstrap-%, the example's: make bootstrap), TAG its
# tag, REPO the repository its tarballs are tagged in. It writes bin/function-image/oci and
# bin/function-image/function-linux-ARCH.tar.
FUNCTION_BOOTSTRAP ?= bin/bootstrap-%
TAG ?= $(VERSION)
REPO ?= function
function-image:
	cd deploy && $(GO) run ./cmd/esm-image -from ../bin/image/oci \
		$(foreach a,$(IMAGE_ARCHS),-bootstrap $(a)=$(abspath $(subst %,$(a),$(FUNCTION_BOOTSTRAP)))) \
		-version '$(TAG)' -repo '$(REPO)' -created '$(SOURCE_DATE_EPOCH)' \
		-layout ../bin/function-image/oci -tarballs ../bin/function-image

# demo installs the emulator (npm ci), builds esm, and runs the end-to-end demo on a private
# kinesis-local: a 2-shard stream split and merged while the example handler runs. Exits by itself.
demo: node_modules/.package-lock.json build
	$(GO) run ./cmd/demo -esm bin/esm

# demo-efo is the same story read through an enhanced fan-out consumer that esm registers on the
# emulator (SubscribeToShard instead of GetRecords); both end with the put→invoke latency.
demo-efo: node_modules/.package-lock.json build
	$(GO) run ./cmd/demo -esm bin/esm -efo

# demo-ddb tells the story on a DynamoDB table's stream: ddb-local (built and started by the demo,
# shards rotating every 4 s), writes of every kind, rotations while they flow, a poison change
# bisected into an SQS queue (goaws, in-process), the example function for DynamoDB streams run
# with exec:, and the checks.
demo-ddb: build
	$(GO) run ./cmd/demo -esm bin/esm -ddb

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund

# latency measures put-to-invoke latency, enhanced fan-out against polling at 1 s and 200 ms, on
# the in-memory fake (./poller/) and on kinesis-local (./cmd/esm/), in one go test run.
latency: node_modules/.package-lock.json
	$(GO) test -run '^$$' -bench 'PutToInvokeLatency' -benchtime 40x ./poller/ ./cmd/esm/

# bench runs the Go benchmarks: poller throughput on the in-memory fake (one op = one 1 KiB
# record, single core), and put-to-invoke latency, enhanced fan-out against polling at 1 s and
# 200 ms, on the fake and on kinesis-local; and the memory and CPU of one process reading
# BENCH_SHARDS idle shards (ManyIdleShards: one worker on the fakes, the esm binary on
# kinesis-local and on the in-memory Kinesis over HTTP; ManyIdleSubscriptions: the esm binary
# holding a subscription per idle shard of the in-memory Kinesis over HTTP).
BENCH_SHARDS ?= 500,1000
bench: node_modules/.package-lock.json
	$(GO) test -run '^$$' -bench 'Poller' -benchtime 200000x -cpu 1 ./poller/
	$(MAKE) latency
	$(GO) test -run '^$$' -bench 'InvokeOverhead' -benchtime 5000x ./e2e/rie/
	$(GO) test -run '^$$' -bench 'ManyIdleShards' -benchtime 1x ./internal/testbed/leasesim/ -args -shards=$(BENCH_SHARDS)
	$(GO) test -run '^$$' -bench 'ManyIdle' -benchtime 1x -timeout 30m ./cmd/esm/ -args -shards=$(BENCH_SHARDS)

.PHONY: bench-idle

# bench-idle measures what idle shards cost: the esm binary reading IDLE_SHARDS idle shards of the
# in-memory Kinesis over HTTP, polled once a second, first built with GetRecords through the SDK
# client (-sdk-before: esm=sdk) and then as built (esm=this), in one run, then holding an enhanced
# fan-out subscription per idle shard. IDLE_PROFILE=DIR writes each esm process's CPU profile over
# the measured window to DIR (go tool pprof DIR/cpu-...pprof).
IDLE_SHARDS ?= 500,1000,2000
IDLE_FLAGS = -shards=$(IDLE_SHARDS) $(if $(IDLE_PROFILE),-esm-cpuprofile=$(IDLE_PROFILE))
bench-idle:
	$(GO) test -run '^$$' -bench 'ManyIdleShardsFakeKinesis' -benchtime 1x -timeout 60m ./cmd/esm/ -args -sdk-before $(IDLE_FLAGS)
	$(GO) test -run '^$$' -bench 'ManyIdleSubscriptionsFakeKinesis' -benchtime 1x -timeout 60m ./cmd/esm/ -args $(IDLE_FLAGS)

.PHONY: sim-scale

# sim-scale runs the lease protocol at 10,000 shards over 100 workers in virtual time (real
# pollers and lease code on the in-memory Kinesis and DynamoDB with capacity accounting) and
# prints one line per target of issue 15, then 300 seeds of it under faults. CI runs the same
# tests at 1,000 shards / 10 workers as part of "make test".
sim-scale:
	$(GO) test -count=1 -timeout 60m -run 'TestScale' -v ./internal/testbed/leasesim/ -args -scale=full 2>&1 | grep -E 'target|^(--- |ok|FAIL)'
	$(GO) test -count=1 -timeout 30m -run 'TestFaultSeeds' -v ./internal/testbed/leasesim/ -args -seeds=300 2>&1 | grep -E 'seeds,|violations|^(--- FAIL|ok|FAIL)'

.PHONY: bootstrap rie

# bootstrap builds the example function as a Lambda custom-runtime bootstrap for provided.al2023,
# one static binary per architecture: bin/bootstrap-amd64 and bin/bootstrap-arm64. Zip one as
# "bootstrap" to deploy it, or run it under bin/aws-lambda-rie.
bootstrap:
	for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -tags lambda.norpc -trimpath -o bin/bootstrap-$$arch ./example/bootstrap; \
	done

# rie builds the Lambda Runtime Interface Emulator pinned in go.mod (a tool dependency) into
# bin/aws-lambda-rie. Run a bootstrap under it, on loopback only, e.g.
#   bin/aws-lambda-rie --runtime-interface-emulator-address 127.0.0.1:9001 \
#     --runtime-api-address 127.0.0.1:9101 bin/bootstrap-amd64
# and point esm at it with --invoke http://127.0.0.1:9001 (one invocation at a time per instance).
rie:
	$(GO) build -o bin/aws-lambda-rie github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
