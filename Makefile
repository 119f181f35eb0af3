# Hookbot — build, test and run.
SWIFT ?= swift
APT_PACKAGES := liblua5.4-dev lua5.4 libsqlite3-dev libvips-dev libpcre2-dev pkg-config
## Headless Chromium and its WebDriver, for the console's browser test.
BROWSER_PACKAGES := chromium chromium-driver
## PostgreSQL's server, for the cluster tests and the server suites on PostgreSQL (a throwaway cluster per run).
POSTGRES_PACKAGES := postgresql-15
## nginx, for the test of docs/DEPLOY.md's TLS reverse-proxy recipe (the test runs its own nginx; no service is started).
NGINX_PACKAGES := nginx
## Node.js 20 or later, for the console's JavaScript tests (node --test, its WebSocket).
NODE_PACKAGES := nodejs
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps browser postgres nginx node apt-install build test test-suites test-console-js lint format fuzz run bench bench-cluster bench-outside clean

## Install the system packages the build needs (Debian/Ubuntu), only when missing.
deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"

## Install headless Chromium and chromedriver (the console's browser test), only when missing.
browser:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(BROWSER_PACKAGES)"

## Install PostgreSQL's server binaries (tests start clusters of their own; no service is started), only when missing.
postgres:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(POSTGRES_PACKAGES)"

## Install nginx (the reverse-proxy test starts its own), only when missing.
nginx:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(NGINX_PACKAGES)"

## Install Node.js (the console's JavaScript tests), only when missing.
node:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(NODE_PACKAGES)"

apt-install:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

## Build everything and run the whole test suite (the console's browser test included); the format check first.
## The test suites run beside a throwaway PostgreSQL cluster (scripts/with-postgres.sh): everything once on
## SQLite (the cluster tests included), then the server, protobuf and SDK suites again on PostgreSQL.
test: deps browser postgres nginx node lint
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory test-console-js
	scripts/with-postgres.sh $(MAKE) --no-print-directory test-suites
	$(SWIFT) run --skip-build custom-types-example
	$(SWIFT) run --skip-build hookbot test plugins/ examples/CustomTypes/plugins/ examples/Dialogs/plugins/
	$(MAKE) --no-print-directory fuzz

## The test suites (make test runs them beside a PostgreSQL cluster): the XCTest classes, then the Swift Testing
## suites (@Test, the tests repeated per transport as arguments), one test at a time (--no-parallel: Swift Testing
## would run them at once, and they time real servers). The filters match both kinds of test id (module first).
POSTGRES_SUITES := IMServerTests|ProtobufTests|IMClientTests
SQLITE_ONLY := QueryPlanTests|SynchronousLevelTests|DurabilityTests/testAcknowledgedMessagesSurviveSIGKILL|ClusterTests|ReverseProxyTests
test-suites:
	$(SWIFT) test --skip-build --no-parallel
	HOOKBOT_TEST_BACKEND=postgres $(SWIFT) test --skip-build --no-parallel --filter '$(POSTGRES_SUITES)' --skip '$(SQLITE_ONLY)'

## The console's JavaScript (Tests/ConsoleJS): its IM protocol client against a real `hookbot server` (the debug
## build, started on a free port by the test) and its pure helpers. A failing test fails the target.
test-console-js: node
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || \
		{ echo "test-console-js needs Node.js 20 or later (node --test, --experimental-websocket); found $$(node --version)"; exit 1; }
	node --test --experimental-websocket Tests/ConsoleJS/

## Check the formatting (.swift-format) without changing anything; `make format` fixes it.
FORMATTED := Sources Tests Fuzz examples Package.swift
lint:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)
	luac5.4 -p Sources/HookRuntime/Resources/prelude.lua

format:
	$(SWIFT) format format --in-place --recursive --parallel $(FORMATTED)

## Fuzz the JSON and protobuf command decoders and the hookbot.toml loader (libFuzzer from the toolchain),
## FUZZ_SECONDS each, starting from Fuzz/Corpus (copied: new inputs stay in .build/fuzz/corpus).
FUZZ_SECONDS ?= 20
## target:corpus[:ASAN_OPTIONS]. TOMLKit 0.6.0 leaks its C++ tables and key lists on every parse
## (TOMLTable(string:), tableGetKeys): not ours, and hookbot.toml is read once per process, so LeakSanitizer
## is off for the TOML target only.
FUZZ_TARGETS := json-command:json protobuf-command:protobuf toml-config:toml:detect_leaks=0
## The targets have a main of their own (it calls LLVMFuzzerRunDriver), so they link libFuzzer without its
## main and get libFuzzer's coverage instrumentation from the compiler flags that -sanitize=fuzzer implies.
FUZZER_LIB = $(shell find $(dir $(realpath $(shell command -v swift)))../lib -name 'libclang_rt.fuzzer_no_main-*.a' | head -n 1)
FUZZ_FLAGS = -Xswiftc -sanitize=address -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp \
	-Xswiftc -DFUZZING -Xlinker $(FUZZER_LIB) -Xlinker -lstdc++
fuzz:
	@for entry in $(FUZZ_TARGETS); do \
		target=$$(echo $$entry | cut -d: -f1); name=$$(echo $$entry | cut -d: -f2); asan=$$(echo $$entry | cut -d: -f3); \
		corpus=.build/fuzz/corpus/$$name; log=.build/fuzz/$$target.log; \
		$(SWIFT) build --build-path .build/fuzz $(FUZZ_FLAGS) --product fuzz-$$target || exit 1; \
		mkdir -p $$corpus && cp Fuzz/Corpus/$$name/* $$corpus/; \
		echo "fuzzing $$target for $(FUZZ_SECONDS) s"; \
		ASAN_OPTIONS=$$asan .build/fuzz/debug/fuzz-$$target -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix=.build/fuzz/ $$corpus > $$log 2>&1; status=$$?; \
		tail -n 12 $$log; [ $$status -eq 0 ] || { echo "fuzz-$$target failed: see $$log"; exit 1; }; \
	done

## Start the embedded IM server and the bot with the shipped plugins (ws://127.0.0.1:8080/ws). It runs the
## built binary, and prints the command for a second terminal's chat that runs it too (no rebuild).
run: build
	"$$($(SWIFT) build --show-bin-path)/hookbot" run

## Print the benchmark numbers (release build): the bot in process, then as a separate process.
bench: deps
	$(SWIFT) run -c release hookbot bench --summary
	$(SWIFT) run -c release hookbot bench --remote-bot --only w1a,w1b,w2 --summary

## The cluster's numbers (release build): w1b and w3 on two nodes sharing a throwaway PostgreSQL, then one node.
bench-cluster: deps postgres
	$(SWIFT) build -c release --product hookbot
	scripts/with-postgres.sh sh -c '.build/release/hookbot bench --only w1b,w3 --database "$$HOOKBOT_TEST_POSTGRES_URL" --nodes 2 --summary && \
		.build/release/hookbot bench --only w1b,w3 --database "$$HOOKBOT_TEST_POSTGRES_URL" --nodes 1 --summary'

## The outside harness (release build): w1a, w1b, w3 and w4 measured by a separate Node client process over WebSockets,
## the server's CPU read from its own process (docs/PERFORMANCE.md, "The outside harness").
bench-outside: deps node
	@$(MAKE) --no-print-directory apt-install PACKAGES="node-ws"
	$(SWIFT) build -c release --product hookbot
	node scripts/outside-bench.js --binary .build/release/hookbot
	node scripts/outside-bench.js --binary .build/release/hookbot --relaxed-sync --only w1a,w1b
	node scripts/outside-bench.js --binary .build/release/hookbot --only w4

clean:
	rm -rf .build
