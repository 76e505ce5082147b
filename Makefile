# Convenience targets. CI runs .ci/run; these are for people.

GO ?= go
OUT ?= bench-out

.PHONY: build test bench bench-hotpath bench-peers clean

build:
	$(GO) build -o $(OUT)/bin/corput ./cmd/corput

test:
	$(GO) test -race ./...

# Go benchmarks of every package, briefly (CI runs them with -benchtime 1x).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The proxy's hot path end to end over loopback, with a CPU profile in
# $(OUT)/hotpath.cpu.prof (go tool pprof -top $(OUT)/hotpath.cpu.prof).
bench-hotpath:
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -cpuprofile $(OUT)/hotpath.cpu.prof -o $(OUT)/hotpath.test ./bench/hotpath

# corput beside HAProxy, nginx and Caddy (issue 8): installs them and wrk with
# apt-get when missing, runs every scenario for every proxy, writes
# $(OUT)/peers.json and $(OUT)/peers.md. Takes about five minutes.
# Pass flags with PEERS_FLAGS, e.g. make bench-peers PEERS_FLAGS='--rounds 3 -v'.
bench-peers: build
	$(GO) run ./bench/peers --corput $(OUT)/bin/corput --out $(OUT) $(PEERS_FLAGS)

clean:
	rm -rf $(OUT)
