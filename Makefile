# Everything CI runs is `make test`.
GO    ?= go
BIN   := $(CURDIR)/bin

# Packages whose tests compare with golden files; only they know the -update flag.
GOLDEN_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | grep 'internal/golden' | grep -v '^[^ ]*/internal/golden ' | cut -d' ' -f1)

.PHONY: test unit lint render update-golden

## test: lint, then every test of the module.
test: lint unit

unit:
	$(GO) test -count=1 ./...

## lint: gofmt and go vet, for the library and the tool modules under hack/.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## render: what the plugins emit for the embedded sample Profile.
render:
	$(GO) run ./examples/render

## update-golden: rewrite the golden files from the current output. Read `git diff testdata` before committing.
update-golden:
	$(GO) test -count=1 $(GOLDEN_PKGS) -update
