#!/usr/bin/env bash
# bench-wire: the outside load generator (examples/loadgen) against a real
# `ioa serve` over TCP. It builds bin/ioa and bin/loadgen, starts a secure
# `ioa serve` on a temporary data dir (a free loopback port, no HTTP, no
# configured agents: only the idle coordinator), issues each wire agent's
# credentials with `ioa agent add`, waits until `ioa serve --check` says
# ready, runs the load generator, and stops the server.
#
#   ./scripts/bench-wire.sh [loadgen flags...]      e.g. --goals 5000 --concurrency 100
#   TEAMS=4 ./scripts/bench-wire.sh                 (the teams to issue creds for and run)
#
# Environment: GO (go), BIN (bin/ioa), LOADGEN (bin/loadgen), TEAMS (1),
# RUNS (3: the load generator's runs; its table shows each figure's median),
# KEEP=1 keeps the temporary data dir and the server's log.
set -euo pipefail

GO=${GO:-go}
BIN=${BIN:-bin/ioa}
LOADGEN=${LOADGEN:-bin/loadgen}
TEAMS=${TEAMS:-1}
RUNS=${RUNS:-3}

cd "$(dirname "$0")/.."
mkdir -p "$(dirname "$BIN")" "$(dirname "$LOADGEN")"
"$GO" build -o "$BIN" ./cmd/ioa
"$GO" build -o "$LOADGEN" ./examples/loadgen

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ioa-bench-wire.XXXXXX")
data=$tmp/data
log=$tmp/serve.log
pid=
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -INT "$pid" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [[ ${KEEP:-} == 1 ]]; then
		echo "bench-wire: kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The server: its own data dir, a free port (127.0.0.1:0), no HTTP, no
# config (so no demo agents), and nothing from the environment that would
# point it at another server or config.
env -u IOA_CONFIG -u IOA_NATS_URL -u NATS_URL -u IOA_CREDS \
	"$BIN" serve --data-dir "$data" --listen 127.0.0.1:0 --http none >"$log" 2>&1 &
pid=$!

url=
for _ in $(seq 300); do
	url=$(sed -n 's/.*listening on \(nats:\/\/[0-9.]*:[0-9]*\).*/\1/p' "$log" | head -1)
	[[ -n $url ]] && break
	kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; echo "bench-wire: ioa serve exited" >&2; exit 1; }
	sleep 0.1
done
[[ -n $url ]] || { cat "$log" >&2; echo "bench-wire: ioa serve printed no NATS URL" >&2; exit 1; }

# Readiness: the orchestrator's <prefix>.health, asked by ioa serve --check
# with the admin credentials the server wrote in $data/creds.
if ! "$BIN" serve --check --wait 60s --nats-url "$url" --data-dir "$data" >/dev/null; then
	cat "$log" >&2
	echo "bench-wire: ioa serve did not become ready" >&2
	exit 1
fi

# One identity per wire agent, beside the admin's creds.
for ((i = 0; i < TEAMS; i++)); do
	for n in "lg-lead-$i" "lg-work-$i-1" "lg-work-$i-2" "lg-work-$i-3"; do
		"$BIN" agent add "$n" --data-dir "$data" --out "$data/creds/$n.creds" >/dev/null
	done
done

echo "bench-wire: ioa serve on $url (data $data); loadgen $*" >&2
status=0
"$LOADGEN" --url "$url" --creds-dir "$data/creds" --teams "$TEAMS" --runs "$RUNS" "$@" || status=$?
exit $status
