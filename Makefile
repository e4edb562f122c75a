# Everything CI runs is `make test`.
GO    ?= go
BIN   := $(CURDIR)/bin

# Packages whose tests compare with golden files; only they know the -update flag.
GOLDEN_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | grep 'internal/golden' | grep -v '^[^ ]*/internal/golden ' | cut -d' ' -f1)

# The versions the Kubeflow profiles controller pins: importing this module must not raise them.
FLOORS = sigs.k8s.io/controller-runtime@v0.24.1 k8s.io/api@v0.36.3 k8s.io/apimachinery@v0.36.3 \
	k8s.io/client-go@v0.36.3 k8s.io/pod-security-admission@v0.36.3 istio.io/api@v1.30.3 istio.io/client-go@v1.30.3

# The integration tests find kube-apiserver and etcd here (controller-runtime's envtest convention).
export KUBEBUILDER_ASSETS ?= $(BIN)

# What needs the test API server depends on this: it builds it only when the tests use bin/.
NEEDS_ENVTEST = $(if $(filter $(BIN),$(KUBEBUILDER_ASSETS)),envtest)

# The newest versions the module proxy serves of what the profiles controller pins. `make
# test-newest` raises them in a copy of go.mod (bin/newest/go.mod, made fresh from go.mod each
# run, so it never goes stale) and tests with it; go.mod keeps the floors.
NEWEST = sigs.k8s.io/controller-runtime@v0.25.2 k8s.io/api@v0.37.2 k8s.io/apimachinery@v0.37.2 \
	k8s.io/client-go@v0.37.2 k8s.io/pod-security-admission@v0.37.2 istio.io/api@v1.32.0 \
	istio.io/client-go@v1.32.0 sigs.k8s.io/gateway-api@v1.6.3
NEWEST_MODFILE = $(BIN)/newest/go.mod

# Fuzz targets as package:Function. `make fuzz` runs each for FUZZTIME; `make test` briefly.
# FUZZTIME is a count of inputs, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report its own deadline as a failure (golang/go#75804, "context deadline exceeded" with no
# failing input; it failed a CI run of ours), and a count also does the same work on any machine.
FUZZ_TARGETS = ./config/v1alpha1:FuzzParseConfig ./kubeflow/profilev1:FuzzParseProfile .:FuzzGenerate ./authz:FuzzIdentityMatchesOnlyItself
FUZZTIME    ?= 20000x

# The release version stamped into both programs (internal/buildinfo) and the image's tag.
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.1.0-dev)
LDFLAGS  = -X github.com/kubeflow-ambient/profile-plugins/internal/buildinfo.Version=$(VERSION)
# The image `make image` writes, its name and tag (deploy/base references the name; an admin's
# overlay overrides it with `images:`), and its platform.
IMAGE         ?= ghcr.io/kubeflow-ambient/profile-plugins-controller
IMAGE_TARBALL ?= $(BIN)/profile-plugins-controller.tar
IMAGE_ARCH    ?= $(shell $(GO) env GOARCH)

# Modules of their own under hack/ whose tests `make test` runs too (their tools would raise the
# library's dependencies).
HACK_TEST_MODULES = hack/image hack/kustomize

.PHONY: test test-stock test-istiod test-open-findings unit hack-test lint golangci-lint floors envtest fuzz fuzz-short bench bench-cost bench-scale bench-report render update-golden test-newest mutate image kustomize-build release-binaries

## test: lint, build the test API server if needed, then every test of the module.
## With KUBEBUILDER_ASSETS pointing elsewhere, those binaries are used and nothing is built.
test: lint $(NEEDS_ENVTEST) unit hack-test fuzz-short

## hack-test: the tests of the tool modules under hack/ (the image packer, the kustomize builder).
hack-test:
	@for m in $(HACK_TEST_MODULES); do echo "== $$m"; (cd $$m && GOFLAGS=-buildvcs=false $(GO) vet ./... && GOFLAGS=-buildvcs=false $(GO) test -count=1 ./...) || exit 1; done

## image: the controller as an OCI image tarball (IMAGE_TARBALL), built from Go modules only: a
## static binary (CGO_ENABLED=0) on an empty base, run as 65532:65532, tagged IMAGE:VERSION; then
## the image's test reads the tarball. Load it with `skopeo copy oci-archive:$(IMAGE_TARBALL)
## docker://...`, `podman load -i`, `docker load -i` (25+) or `kind load image-archive`.
image:
	@mkdir -p $(BIN)/image
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
	  -o $(BIN)/image/profile-plugins-controller ./cmd/profile-plugins-controller
	cd hack/image && GOFLAGS=-buildvcs=false $(GO) run . -binary $(BIN)/image/profile-plugins-controller \
	  -out $(IMAGE_TARBALL) -ref $(IMAGE):$(VERSION) -version $(VERSION) -os linux -arch $(IMAGE_ARCH)
	cd hack/image && IMAGE_TARBALL=$(IMAGE_TARBALL) GOFLAGS=-buildvcs=false $(GO) test -count=1 -run TestImage .

## release-binaries: both programs for linux and darwin, amd64 and arm64, stamped with VERSION,
## into bin/release/ (what a release attaches besides the image).
release-binaries:
	@mkdir -p $(BIN)/release
	@for p in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do os=$${p%/*}; arch=$${p#*/}; \
	  for c in profile-plugins profile-plugins-controller; do \
	    CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
	      -o $(BIN)/release/$$c-$(VERSION)-$$os-$$arch ./cmd/$$c || exit 1; done; done

## kustomize-build: print what `kubectl kustomize` prints for DIR (default the no-fork overlay),
## with hack/kustomize (krusty), so no kubectl is needed.
DIR ?= deploy/overlays/beside-kubeflow
kustomize-build:
	@cd hack/kustomize && GOFLAGS=-buildvcs=false $(GO) run . $(CURDIR)/$(DIR)

## unit: every test of the module once, then in the same test binary every benchmark once on 10
## namespaces (one build and link of each package's tests instead of two: about a minute less on two
## cores). The slowest package takes about two minutes; go test's 10-minute default is raised because
## under load it once timed out a run whose tests all passed.
unit:
	BENCH_PROFILES=10 BENCH_RUNS=1 $(GO) test -count=1 -timeout 30m -bench . -benchtime 1x ./...

## test-stock: the plugins beside the unmodified stock profiles controller and kfam, both built from
## the kubeflow/dashboard checkout DASHBOARD names (module proxy needed; docs/stock.md records the
## commit tested). The reference controller runs as the no-fork overlay's ServiceAccount with the
## overlay's PluginConfig and the stock controller reads the overlay's namespace-labels file;
## PLUGIN_CONFIG and STOCK_NAMESPACE_LABELS override those files. Not part of `make test`: without DASHBOARD it fails here, and
## `go test` skips the test with a NOT RUN message.
DASHBOARD ?=
test-stock: $(NEEDS_ENVTEST)
	@if [ -z "$(DASHBOARD)" ]; then echo "test-stock: set DASHBOARD to a kubeflow/dashboard checkout (e.g. make test-stock DASHBOARD=../dashboard); nothing was tested"; exit 1; fi
	DASHBOARD="$(abspath $(DASHBOARD))" PLUGIN_CONFIG="$(if $(PLUGIN_CONFIG),$(abspath $(PLUGIN_CONFIG)))" \
	  STOCK_NAMESPACE_LABELS="$(if $(STOCK_NAMESPACE_LABELS),$(abspath $(STOCK_NAMESPACE_LABELS)))" \
	  $(GO) test -count=1 -v -timeout 30m -run '^TestBesideTheStockProfilesController$$' ./cmd/profile-plugins-controller/

## test-istiod: the reference controller with the real istiod: Istio 1.30.3's pilot-discovery, built
## from ISTIO (an istio/istio checkout or bare git dir holding tag 1.30.3, or a source tree of it)
## with agentgateway's api/ module from AGW (an agentgateway/agentgateway checkout or git dir
## holding the commit Istio pins; the module proxy serves neither), on the test API server, with
## only pod readiness and garbage collection stood in (hack/istiod; docs/testing.md says what it
## verifies). Not part of `make test`: CI cannot fetch Istio's source. The first build of
## pilot-discovery compiles most of Istio (nice -n 19, go build -p ISTIOD_GO_P); later ones reuse
## Go's build cache. Work files go to bin/istiod/.
ISTIO       ?=
AGW         ?=
ISTIOD_GO_P ?= 1
ISTIO_COMMIT = 56df41f63e513f834c9a3af33d8aed82d1d961f2
AGW_COMMIT   = 6ae4ab07bb065decfc9abd30fca34bce5dd70494
ISTIOD_DIR   = $(BIN)/istiod
ISTIOD_LDFLAGS = -X istio.io/istio/pkg/version.buildVersion=1.30.3 -X istio.io/istio/pkg/version.buildGitRevision=$(ISTIO_COMMIT) \
	-X istio.io/istio/pkg/version.buildTag=1.30.3 -X istio.io/istio/pkg/version.buildStatus=Clean -X istio.io/istio/pkg/version.buildHub=docker.io/istio
test-istiod: $(NEEDS_ENVTEST)
	@if [ -z "$(ISTIO)" ]; then echo "test-istiod: set ISTIO to an istio/istio checkout (or git dir) holding tag 1.30.3 ($(ISTIO_COMMIT)) and AGW to an agentgateway/agentgateway checkout holding $(AGW_COMMIT), e.g. make test-istiod ISTIO=../istio AGW=../agentgateway; nothing was tested"; exit 1; fi
	@mkdir -p $(ISTIOD_DIR)
	@if git -C "$(ISTIO)" cat-file -e $(ISTIO_COMMIT)^{commit} 2>/dev/null; then \
	  if [ "$$(cat $(ISTIOD_DIR)/istio-src.commit 2>/dev/null)" != $(ISTIO_COMMIT) ]; then \
	    echo "test-istiod: unpacking istio/istio $(ISTIO_COMMIT) (tag 1.30.3) into $(ISTIOD_DIR)/istio-src"; \
	    rm -rf $(ISTIOD_DIR)/istio-src && mkdir $(ISTIOD_DIR)/istio-src && \
	    git -C "$(ISTIO)" archive $(ISTIO_COMMIT) | tar -x -C $(ISTIOD_DIR)/istio-src && echo $(ISTIO_COMMIT) > $(ISTIOD_DIR)/istio-src.commit || exit 1; fi; \
	elif grep -qx 'module istio.io/istio' "$(ISTIO)/go.mod" 2>/dev/null && grep -q 'istio.io/api v1.30.3-0.20260710004328' "$(ISTIO)/go.mod"; then \
	  rm -rf $(ISTIOD_DIR)/istio-src $(ISTIOD_DIR)/istio-src.commit && ln -s "$(abspath $(ISTIO))" $(ISTIOD_DIR)/istio-src; \
	else echo "test-istiod: ISTIO=$(ISTIO) is neither a git dir holding $(ISTIO_COMMIT) (tag 1.30.3) nor an istio/istio tree at 1.30.3"; exit 1; fi
	@if [ "$$(cat $(ISTIOD_DIR)/agentgateway/api.commit 2>/dev/null)" != $(AGW_COMMIT) ]; then \
	  git -C "$(AGW)" cat-file -e $(AGW_COMMIT)^{commit} 2>/dev/null || { echo "test-istiod: set AGW to an agentgateway/agentgateway checkout (or git dir) holding $(AGW_COMMIT), e.g. make test-istiod ISTIO=$(ISTIO) AGW=../agentgateway"; exit 1; }; \
	  rm -rf $(ISTIOD_DIR)/agentgateway && mkdir -p $(ISTIOD_DIR)/agentgateway && \
	  git -C "$(AGW)" archive $(AGW_COMMIT) api | tar -x -C $(ISTIOD_DIR)/agentgateway && echo $(AGW_COMMIT) > $(ISTIOD_DIR)/agentgateway/api.commit; fi
	@# Istio's own go.mod, with what the module proxy refuses replaced: agentgateway's api (pinned
	@# at an unserved commit) from AGW, client-go and go-control-plane at the next served versions.
	cp $(ISTIOD_DIR)/istio-src/go.mod $(ISTIOD_DIR)/pilot.mod && cp $(ISTIOD_DIR)/istio-src/go.sum $(ISTIOD_DIR)/pilot.sum
	$(GO) mod edit -replace github.com/agentgateway/agentgateway/api=$(ISTIOD_DIR)/agentgateway/api -require istio.io/client-go@v1.30.3 \
	  -require github.com/envoyproxy/go-control-plane/envoy@v1.37.1-0.20260713214202-ca8ce173c36f \
	  -require github.com/envoyproxy/go-control-plane/contrib@v1.36.1-0.20260713214202-ca8ce173c36f $(ISTIOD_DIR)/pilot.mod
	cd $(ISTIOD_DIR)/istio-src && GOFLAGS=-buildvcs=false GOWORK=off nice -n 19 $(GO) build -p $(ISTIOD_GO_P) -modfile=$(ISTIOD_DIR)/pilot.mod -mod=mod \
	  -ldflags '$(ISTIOD_LDFLAGS)' -o $(ISTIOD_DIR)/pilot-discovery ./pilot/cmd/pilot-discovery
	$(GO) build -o $(ISTIOD_DIR)/pp/ ./cmd/profile-plugins ./cmd/profile-plugins-controller
	cd hack/istiod && GOFLAGS=-buildvcs=false $(GO) vet ./... && ISTIOD_BIN=$(ISTIOD_DIR)/pilot-discovery \
	  ISTIO_CHART=$(ISTIOD_DIR)/istio-src/manifests/charts/istio-control/istio-discovery PP_BIN=$(ISTIOD_DIR)/pp \
	  GOFLAGS=-buildvcs=false $(GO) test -count=1 -v -timeout 60m ./...

## test-open-findings: the open findings of the attack reviews (internal/integration, build tag
## openfindings). Each test fails while its finding stands, so this target fails until all are fixed.
test-open-findings: $(NEEDS_ENVTEST)
	$(GO) test -count=1 -tags openfindings -run 'TestWithdrawnOverrideNotHeldByTenantPods|TestRevokeDoesNotWaitOnTenantPods|TestMetadataRestoreRoutesAfterIstiod|TestPinnedRoutingLabelKeepsWaypoint' ./internal/integration/

## bench: generation benchmarks (5 runs each) and the API benchmark with BENCH_N (1,000) namespaces full of
## clutter, each implementation in its own process, BENCH_RUNS (3) rotated runs; the waiting
## namespace's requeues, the cost benchmark and an ambient-to-sidecar switch of BENCH_N namespaces
## (BenchmarkSwitch); then BENCHMARKS.md
## (BENCH_OUT) from every raw file in bin/. Each raw file is written as it runs (bin/*.part) and
## replaces the last complete one only when its run succeeds, so a failed or interrupted run loses
## nothing measured before; `make bench-report` rewrites the report from what bin/ holds.
BENCH_N       ?= 1000
BENCH_SCALE_N ?= 10000
BENCH_RUNS    ?= 3
BENCH_OUT     ?= BENCHMARKS.md
BENCH_COST = bash -o pipefail -c 'BENCH_PROFILES=$$0 $(GO) test -run "^$$" -bench Cost -benchtime 1x -timeout $$1 ./internal/bench/ | tee $(BIN)/bench-cost-$$0.txt.part && mv $(BIN)/bench-cost-$$0.txt.part $(BIN)/bench-cost-$$0.txt'
BENCH_SWITCH = bash -o pipefail -c 'BENCH_PROFILES=$$0 $(GO) test -run "^$$" -bench Switch -benchtime 1x -timeout $$1 ./internal/bench/ | tee $(BIN)/bench-switch-$$0.txt.part && mv $(BIN)/bench-switch-$$0.txt.part $(BIN)/bench-switch-$$0.txt'
BENCH_CHART ?= docs/cost-memory.svg
BENCH_RAW   ?= BENCHMARKS-raw.txt
BENCH_API = bash -o pipefail -c 'BENCH_PROFILES=$$0 BENCH_RUNS=$(BENCH_RUNS) $(GO) test -run "^$$" -bench API -benchtime 1x -timeout $$1 ./internal/bench/ | tee $(BIN)/bench-api-$$0.txt.part && mv $(BIN)/bench-api-$$0.txt.part $(BIN)/bench-api-$$0.txt'

bench: $(NEEDS_ENVTEST)
	@mkdir -p $(BIN)
	bash -o pipefail -c '$(GO) test -run "^$$" -bench "Generate|FullSet" -benchmem -count 5 ./internal/bench/ | tee $(BIN)/bench-gen.txt.part' && mv $(BIN)/bench-gen.txt.part $(BIN)/bench-gen.txt
	bash -o pipefail -c '$(GO) test -run "^$$" -bench "Waiting" -benchtime 1x ./internal/bench/ | tee $(BIN)/bench-waiting.txt.part' && mv $(BIN)/bench-waiting.txt.part $(BIN)/bench-waiting.txt
	$(BENCH_API) $(BENCH_N) 120m
	$(BENCH_COST) $(BENCH_N) 120m
	$(BENCH_SWITCH) $(BENCH_N) 60m
	@$(MAKE) --no-print-directory bench-report

## bench-scale: the API benchmark with BENCH_SCALE_N (10,000) namespaces; added to BENCHMARKS.md. Hours.
## bench-cost: only the cost benchmark (BenchmarkCost: the reference controller over BENCH_N Profile
## namespaces, 0-100% active, for always, onDemand and sidecar mode), then BENCHMARKS.md.
bench-cost: $(NEEDS_ENVTEST)
	@mkdir -p $(BIN)
	$(BENCH_COST) $(BENCH_N) 120m
	@$(MAKE) --no-print-directory bench-report

bench-scale: $(NEEDS_ENVTEST)
	@mkdir -p $(BIN)
	$(BENCH_API) $(BENCH_SCALE_N) 360m
	@$(MAKE) --no-print-directory bench-report

## bench-report: BENCH_OUT from the raw files in bin/ (the report orders the N values itself), and
## beside it BENCH_RAW, the lines of those files benchstat reads, which the report links.
bench-report:
	$(GO) run ./internal/benchreport -command "make bench bench-scale" -chart $(BENCH_CHART) -raw $(BENCH_RAW) $(wildcard $(BIN)/bench-gen.txt) \
	  $(wildcard $(BIN)/bench-waiting.txt) $(wildcard $(BIN)/bench-switch-*.txt) $(wildcard $(BIN)/bench-api-*.txt) $(wildcard $(BIN)/bench-cost-*.txt) > $(BENCH_OUT).tmp && mv $(BENCH_OUT).tmp $(BENCH_OUT)

## envtest: build kube-apiserver (k8s.io/kubernetes v1.37.2) and etcd (v3.6.16) from Go modules into
## bin/, each in its own tool module under hack/. Skips what is built; the first build takes minutes.
envtest: $(BIN)/kube-apiserver $(BIN)/etcd

$(BIN)/kube-apiserver: hack/kube-apiserver/go.mod hack/kube-apiserver/go.sum
	cd hack/kube-apiserver && $(GO) build -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/etcd: hack/etcd/go.mod hack/etcd/go.sum hack/etcd/main.go
	cd hack/etcd && $(GO) build -o $(BIN)/etcd .

## fuzz: run every fuzz target for FUZZTIME (a duration, or a count like 1000x), then the runner's
## stateful property test for SAFETY_CHECKS sequences (`unit` runs 200 of them; 0 skips it here).
SAFETY_CHECKS ?= 10000
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "== $$fn ($$pkg), $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done
	@if [ "$(SAFETY_CHECKS)" != 0 ]; then echo "== TestRunnerSafety (./internal/safety), $(SAFETY_CHECKS) sequences"; \
	  $(GO) test -count=1 -timeout 180m -run '^TestRunnerSafety$$' ./internal/safety/ -rapid.checks=$(SAFETY_CHECKS); fi

## fuzz-short: what `make test` runs: 300 inputs per target beyond the seed corpus (a few seconds
## each; the property test's short form already ran in `unit`).
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=300x SAFETY_CHECKS=0

## lint: the dependency floors, go vet, and golangci-lint with the linters and formatters of
## .golangci.yml (gofmt, goimports among them).
lint: floors $(BIN)/golangci-lint
	$(GO) vet ./...
	$(BIN)/golangci-lint run ./...

## golangci-lint: build the pinned golangci-lint (hack/golangci-lint/go.mod, its own module) into bin/.
golangci-lint: $(BIN)/golangci-lint

$(BIN)/golangci-lint: hack/golangci-lint/go.mod hack/golangci-lint/go.sum
	cd hack/golangci-lint && $(GO) build -o $(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## test-newest: every test against the NEWEST versions (controller-runtime, k8s.io, Istio, Gateway
## API) through a modfile of their own, without raising go.mod's floors. Nested go commands (the
## CRD lookup, the fork-patch build) see the same modfile through GOFLAGS.
test-newest: $(NEEDS_ENVTEST)
	@mkdir -p $(dir $(NEWEST_MODFILE))
	cp go.mod $(NEWEST_MODFILE) && cp go.sum $(NEWEST_MODFILE:.mod=.sum)
	$(GO) get -modfile=$(NEWEST_MODFILE) $(NEWEST)
	$(GO) mod tidy -modfile=$(NEWEST_MODFILE)
	GOFLAGS="$$($(GO) env GOFLAGS) -modfile=$(NEWEST_MODFILE)" $(GO) test -count=1 -timeout 30m ./...

## floors: fail when the build selects a newer version than the profiles controller pins.
floors:
	@for f in $(FLOORS); do m=$${f%@*}; want=$${f#*@}; got=$$($(GO) list -m -f '{{.Version}}' $$m); \
	  if [ "$$got" != "$$want" ]; then echo "$$m is $$got in the build, but the floor is $$want: a dependency change raised it"; exit 1; fi; done

## render: what the plugins emit for the embedded sample Profile.
render:
	$(GO) run ./cmd/profile-plugins render

## update-golden: rewrite the golden files from the current output. Read `git diff testdata` before committing.
## Some golden tests run against the test API server, so it is built first when missing.
update-golden: $(NEEDS_ENVTEST)
	$(GO) test -count=1 $(GOLDEN_PKGS) -update

# Library packages whose unit tests must kill the mutants gremlins makes (each directory recursively).
MUTATE_PKGS = plugin runner ownership config kubeflow authz pss waypoint platform internal/ssa internal/labelowners
MUTATE_EFFICACY ?= 95

## mutate: mutation testing of the library packages with gremlins (hack/gremlins pins v0.6.0); fails
## below MUTATE_EFFICACY percent killed. -count=1 keeps the coverage run from being a cached one (a
## cached run times out every mutant). Each mutant reruns its own package's tests, so ./runner
## (about 400 covered mutants, runner/dryrun's included, 10 to 20 s each on two cores) takes about
## two hours; the others minutes to about half an hour each. runner and platform start the test API
## server. docs/testing.md says what each package measured and which mutants are equivalent.
mutate: $(NEEDS_ENVTEST)
	cd hack/gremlins && $(GO) build -o $(BIN)/gremlins github.com/go-gremlins/gremlins/cmd/gremlins
	@for p in $(MUTATE_PKGS); do echo "== $$p"; \
	  GOFLAGS=-count=1 $(BIN)/gremlins unleash --workers 1 --threshold-efficacy $(MUTATE_EFFICACY) ./$$p || exit 1; done
