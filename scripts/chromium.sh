#!/usr/bin/env sh
# Installs Chromium for the web console's browser test (console/browser_test.go,
# driven with chromedp) when no Chromium or Chrome is on the PATH: Debian's
# chromium package with apt-get, as root, or with sudo in CI (CI=true or
# IOA_REQUIRE_CHROMIUM=1). Where that is not possible it says so; the test
# then skips, except in CI, where it fails.
set -eu
for b in chromium chromium-browser google-chrome google-chrome-stable; do
	if command -v "$b" >/dev/null 2>&1; then
		exit 0
	fi
done
if ! command -v apt-get >/dev/null 2>&1; then
	echo "no Chromium and no apt-get: the console's browser test will skip; install Chromium or Chrome yourself"
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	# sudo only where a browser is required (CI), never a password
	# prompt in the middle of a developer's make test.
	if [ "${CI:-}" != "true" ] && [ "${IOA_REQUIRE_CHROMIUM:-}" != "1" ] || ! command -v sudo >/dev/null 2>&1; then
		echo "no Chromium: the console's browser test will skip; install it with: sudo apt-get install -y chromium"
		exit 0
	fi
	SUDO="sudo"
fi
echo "installing chromium (apt-get) for the console's browser test"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
