# Hookbot — build, test and run.
SWIFT ?= swift
APT_PACKAGES := liblua5.4-dev libsqlite3-dev pkg-config
## Headless Chromium and its WebDriver, for the console's browser test.
BROWSER_PACKAGES := chromium chromium-driver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps browser apt-install build test lint format run bench clean

## Install the system packages the build needs (Debian/Ubuntu), only when missing.
deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"

## Install headless Chromium and chromedriver (the console's browser test), only when missing.
browser:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(BROWSER_PACKAGES)"

apt-install:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

## Build everything and run the whole test suite (the console's browser test included); the format check first.
test: deps browser lint
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing
	$(SWIFT) run --skip-build custom-types-example
	$(SWIFT) run --skip-build hookbot test plugins/ examples/CustomTypes/plugins/

## Check the formatting (.swift-format) without changing anything; `make format` fixes it.
FORMATTED := Sources Tests examples Package.swift
lint:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)

format:
	$(SWIFT) format format --in-place --recursive --parallel $(FORMATTED)

## Start the embedded IM server and the bot with the shipped plugins (ws://127.0.0.1:8080/ws).
run: build
	$(SWIFT) run hookbot run

## Print the benchmark numbers (release build): the bot in process, then as a separate process.
bench: deps
	$(SWIFT) run -c release hookbot bench --summary
	$(SWIFT) run -c release hookbot bench --remote-bot --only w1a,w1b,w2 --summary

clean:
	rm -rf .build
