#!/usr/bin/env sh
# Installs the npm packages of the interop tests (interop/node: the official
# A2A JavaScript SDK, express, the MCP filesystem server) with `npm ci`, from
# the lock file, into interop/node/node_modules (ignored by git). It does
# nothing when they are installed from the same lock file already. Without
# node and npm it says so and leaves the interop tests to skip.
set -eu
cd "$(dirname "$0")/../interop/node"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "node/npm not found: the interop tests (A2A JS SDK, MCP server from npm) will skip; install them with: apt-get install -y nodejs npm"
	exit 0
fi
sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f node_modules/.ioa-lock.sha256 ] && [ "$(cat node_modules/.ioa-lock.sha256)" = "$sum" ]; then
	exit 0
fi
echo "installing the interop npm packages (interop/node)"
npm ci --no-audit --no-fund --loglevel=error
echo "$sum" > node_modules/.ioa-lock.sha256
