#!/usr/bin/env sh
# Installs Chromium for the web console's browser test (console/browser_test.go,
# driven with chromedp) when no Chromium or Chrome is on the PATH: Debian's
# chromium package with apt-get (as root, or with sudo). Where that is not
# possible it says so; the test then skips, except in CI (CI=true or
# IOA_REQUIRE_CHROMIUM=1), where it fails.
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
	if ! command -v sudo >/dev/null 2>&1; then
		echo "no Chromium, and installing it needs root: sudo apt-get install -y chromium (the console's browser test skips until then)"
		exit 0
	fi
	SUDO="sudo"
fi
echo "installing chromium (apt-get) for the console's browser test"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
