# ioa: Internet of Agents on NATS.
GO       ?= go
PKGS     ?= ./...
FUZZTIME ?= 5s
BIN      ?= bin/ioa
STATICCHECK ?= v0.8.2

.PHONY: all build test unit fuzz lint bench demo serve tools clean

all: build

build: ## the ioa binary in bin/
	$(GO) build -o $(BIN) ./cmd/ioa

demo: ## watch a team of agents solve a goal (no API key, no server)
	$(GO) run ./cmd/ioa demo

serve: ## run everything with the demo agents; NATS on 127.0.0.1:4222
	$(GO) run ./cmd/ioa serve --config configs/demo.yaml

test: lint unit fuzz ## everything CI runs: lint, all tests with -race, brief fuzzing

unit: tools
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	# The outcome replay indexes two worlds four times: too slow under -race.
	$(GO) test -count=1 -run TestOutcomeReplay ./registry/search

fuzz: ## run every fuzz target briefly
	./scripts/fuzz.sh $(FUZZTIME)

# lint: gofmt, go vet, a tidy go.mod, and staticcheck's default checks less
# S1016 (a struct literal copying another type's fields, a TeamupReply's chat
# into a LaunchReply, names them; a conversion would silently follow a field
# later added to both).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) mod tidy -diff
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) -checks inherit,-S1016 $(PKGS)

bench: ## the performance table (see README)
	$(GO) run ./cmd/ioa bench

.PHONY: bench-wire
bench-wire: ## goals/s and latency from outside: examples/loadgen over TCP against bin/ioa serve (LOADGEN_FLAGS="--goals 5000", TEAMS=4)
	GO=$(GO) BIN=$(BIN) TEAMS=$(or $(TEAMS),1) ./scripts/bench-wire.sh $(LOADGEN_FLAGS)

tools: ## the nats CLI (CLI examples' tests), nats-server (the cluster fault test), the interop tests' npm packages, Chromium (the console's browser test)
	@command -v nats >/dev/null 2>&1 || [ -x "$$($(GO) env GOPATH)/bin/nats" ] || \
		(echo "installing the nats CLI"; $(GO) install github.com/nats-io/natscli/nats@v0.5.0)
	@[ -x "$$($(GO) env GOPATH)/bin/nats-server" ] || \
		(echo "installing nats-server"; $(GO) install github.com/nats-io/nats-server/v2@v2.15.3)
	@./scripts/node-deps.sh
	@./scripts/chromium.sh

clean:
	rm -rf bin data
