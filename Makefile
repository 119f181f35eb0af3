# Hookbot — build, test and run.
SWIFT ?= swift
APT_PACKAGES := liblua5.4-dev libsqlite3-dev pkg-config
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build test run bench clean

## Install the system packages the build needs (Debian/Ubuntu), only when missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

## Build everything and run the whole test suite.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing
	$(SWIFT) run --skip-build hookbot test plugins/ examples/CustomTypes/plugins/
	$(SWIFT) run --skip-build custom-types-example

## Start the IM server on 127.0.0.1:8080 with ./hookbot.sqlite.
run: build
	$(SWIFT) run hookbot server

clean:
	rm -rf .build
