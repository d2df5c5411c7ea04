# backlog — see README.md.
GO        ?= go
PKGS      ?= ./...
TESTFLAGS ?= -race -count=1 -timeout 60m
DB        ?= sqlite:backlog.db

.PHONY: run test lint bench stress fault fuzz fmt release

## run: serve jobs on the embedded SQLite file (the README's first command)
run:
	$(GO) run ./cmd/backlog --db '$(DB)' serve --handler hello='echo "hello from job $$BACKLOG_JOB_ID: $$(cat)"'

## test: every test — unit, conformance on every reachable database, the
## dashboard in headless Chromium (installed when missing and root), race detector on;
## with BACKLOG_FAULT=1 (set by .ci/run, with bounded sizes) also the fault suite (alone, after the rest),
## with BACKLOG_FUZZTIME=20000x (set by .ci/run) every fuzz target for that many inputs;
## first `go install …/cmd/backlog@version` from a local module proxy (scripts/install-check.sh)
## and go vet with the oldest supported Go and the newest checked (scripts/go-versions.sh);
## the nested module storetest/dbtest/dbcontainer is vetted and tested too
test: lint
	GO=$(GO) scripts/install-check.sh
	GO=$(GO) scripts/go-versions.sh
	-scripts/install-chromium.sh
	-scripts/install-cluster-packages.sh
	eval "$$(scripts/local-dbs.sh)" && $(GO) test $(TESTFLAGS) $$($(GO) list $(PKGS) | grep -v '/internal/faulttest$$')
# the fault suite runs alone, after the rest: it starts its own database
# servers and worker fleets and times leases, so a 2-core machine shared
# with other packages' tests stalls it into failures no fault explains
	eval "$$(scripts/local-dbs.sh)" && $(GO) test $(TESTFLAGS) ./internal/faulttest/
# storetest/dbtest/dbcontainer is a module of its own (testcontainers-go);
# -mod=mod follows the parent's requirements through its replace
	eval "$$(scripts/local-dbs.sh)" && cd storetest/dbtest/dbcontainer && \
		$(GO) vet -mod=mod ./... && $(GO) test -mod=mod -count=1 ./...
	if [ -n "$$BACKLOG_FUZZTIME" ]; then GO=$(GO) scripts/fuzz.sh "$$BACKLOG_FUZZTIME"; fi

## lint: go vet and a gofmt check
lint:
	$(GO) vet $(PKGS)
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## bench: throughput benchmarks (figures go to docs/benchmarks.md)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x $(PKGS)

## stress: the long race-enabled stress tests
stress:
	BACKLOG_STRESS=1 $(GO) test $(TESTFLAGS) -run Stress $(PKGS)

## fault: the fault suite (private PostgreSQL and MariaDB servers, killed
## workers and databases, a per-execution ledger); see internal/faulttest
fault:
	BACKLOG_FAULT=1 $(GO) test -count=1 -timeout 30m ./internal/faulttest/

## fuzz: every fuzz target for FUZZTIME (go test -fuzztime: a count such as 100000x, or a duration) each
fuzz:
	GO=$(GO) scripts/fuzz.sh $(or $(FUZZTIME),100000x)

## release: static binaries for linux and darwin on amd64 and arm64 with the
## version stamped, packed with LICENSE and README.md, and SHA256SUMS, in dist/
## (VERSION=vX.Y.Z; default: the tag at HEAD, else its pseudo-version;
## TARGETS=linux/amd64,… to build fewer); see scripts/release.sh
release:
	GO=$(GO) scripts/release.sh --out dist $(if $(VERSION),--version '$(VERSION)') $(if $(TARGETS),--targets '$(TARGETS)')

fmt:
	gofmt -w $$(git ls-files '*.go')
