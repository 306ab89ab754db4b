#!/usr/bin/env bash
# agent.sh: an ioa agent written with nothing but bash, grep and the nats CLI
# (https://github.com/nats-io/natscli, v0.5.0). It is the proof that any
# language that can send a NATS request can join: everything below follows
# docs/protocol.md and nothing else.
#
# It registers its card, heartbeats, accepts every invitation, listens on its
# inbox, and when a logged chat message assigns it a task it does the task
# (ROT13 of the quoted text) and reports through its outbox; when it is given
# the turn in a discussion it hands the turn back to the launcher.
#
#   NATS_URL=nats://127.0.0.1:4222 ./examples/nats-cli-agent/agent.sh
#
# Environment: NATS_URL, NATS_CREDS (the agent's .creds file, from
# `ioa agent add rot13`; none for an insecure server), AGENT_NAME (rot13),
# IOA_PREFIX (ioa), HEARTBEAT seconds (10), WORK_DELAY seconds per task (0),
# NATS (the nats binary).
#
# It registers, heartbeats and deregisters on the identity-bound subjects
# <p>.registry.<endpoint>.<name>, the only ones its credentials allow.
set -uo pipefail

NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
NAME=${AGENT_NAME:-rot13}
P=${IOA_PREFIX:-ioa}
HEARTBEAT=${HEARTBEAT:-10}
WORK_DELAY=${WORK_DELAY:-0} # seconds each task takes (for trying restarts)
NATS=${NATS:-nats}

log() { printf '%s %s: %s\n' "$(date -u +%H:%M:%S)" "$NAME" "$*" >&2; }
# The nats command line: the server, the agent's credentials (from `ioa agent
# add NAME`; a secure ioa serve requires them) and its own reply inboxes (the
# only ones its credentials may read).
NATSCMD=("$NATS" --server "$NATS_URL" --inbox-prefix "_INBOX.$NAME")
[[ -n ${NATS_CREDS-} ]] && NATSCMD+=(--creds "$NATS_CREDS")
n() { "${NATSCMD[@]}" "$@"; }
# req SUBJECT BODY prints the reply body; an error reply is a JSON object
# with an "error" member (docs/protocol.md: the body of every error reply).
req() { n request --raw --timeout 5s "$1" "$2" 2>&1; }
is_error() { [[ $1 != \{* ]] || [[ $1 == *'"error":{'* ]]; }

# --- JSON without jq -------------------------------------------------------

# json_str TEXT prints TEXT as a JSON string.
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\r'/\\r}
	s=${s//$'\t'/\\t}
	s=${s//[$'\x01'-$'\x1f']/}
	printf '"%s"' "$s"
}

# flatten JSON prints one line per scalar: its path (.tasks[0].assignee), a
# tab, and the JSON token ("rot13", 3, true). Strings stay escaped, so no
# value spans lines.
flatten() {
	local tok path i d=0 want_key=0
	local -a ctype=() ckey=() cidx=()
	while IFS= read -r tok; do
		case $tok in
		'{') d=$((d + 1)) ctype[d]=o ckey[d]= want_key=1 ;;
		'[') d=$((d + 1)) ctype[d]=a cidx[d]=0 want_key=0 ;;
		'}' | ']') d=$((d - 1)) want_key=0 ;;
		':') want_key=0 ;;
		',') if [[ ${ctype[d]} == a ]]; then cidx[d]=$((cidx[d] + 1)); else want_key=1; fi ;;
		*)
			if ((want_key)); then
				ckey[d]=${tok:1:${#tok}-2}
				continue
			fi
			path=
			for ((i = 1; i <= d; i++)); do
				if [[ ${ctype[i]} == o ]]; then path+=.${ckey[i]}; else path+=[${cidx[i]}]; fi
			done
			printf '%s\t%s\n' "$path" "$tok"
			;;
		esac
	done < <(grep -oE '"([^"\\]|\\.)*"|[][{}:,]|[^][{}:,[:space:]"]+' <<<"$1")
}

# unjson TOKEN decodes a JSON string token (quotes included) to text.
unjson() {
	local s=${1:1:${#1}-2}
	s=${s//\\\\/$'\x01'}
	s=${s//\\\"/\"}
	s=${s//\\\//\/}
	s=$(printf '%b' "$s") # \n \t \r \b \f \uXXXX
	printf '%s' "${s//$'\x01'/\\}"
}

# --- the agent -------------------------------------------------------------

# A new incarnation on every start: registering with it tells the referee that
# an earlier process of this agent is gone, and the referee hands this one the
# turn and the tasks that process held (this script keeps no state across
# restarts and needs none).
INCARNATION="i$(date +%s%N)$$"

CARD='{"name":'"$(json_str "$NAME")"',"description":"Encodes and decodes text with ROT13, the letter substitution cipher that rotates each letter by 13 places.","capabilities":["rot13","caesar cipher","encode text","decode text"],"type":"tool","tags":["text","cipher","bash","example"],"max_concurrency":1,"metadata":{"language":"bash"},"incarnation":'"$(json_str "$INCARNATION")"'}'

register() {
	local out
	out=$(req "$P.registry.register.$NAME" "$CARD")
	if is_error "$out"; then
		log "register failed: $out"
		return 1
	fi
	log "registered: $out"
}

heartbeats() {
	local out nap
	trap 'kill $nap 2>/dev/null; exit 0' TERM
	while :; do
		sleep "$HEARTBEAT" &
		nap=$!
		wait $nap
		out=$(req "$P.registry.heartbeat.$NAME" '{"name":'"$(json_str "$NAME")"'}')
		if [[ $out == *not_found* ]]; then
			log "the registry forgot me; registering again"
			register
		elif is_error "$out"; then
			log "heartbeat failed: $out"
		fi
	done
}

# send COMM BODY sends a message to the chat through the outbox; the referee
# answers {"seq","state"} or an error.
send() {
	local out
	out=$(req "$P.agent.$NAME.out.$1" "$2")
	if is_error "$out"; then
		log "refused by the referee: $out"
		return 1
	fi
	log "sent to $1: $out"
}

# work TEXT is the agent's skill: ROT13 of the text between double or single
# quotes (of all of it when there are none).
work() {
	local text=$1
	text=${text%%$'\n\n'*} # later paragraphs carry earlier results
	if [[ $text == *\"*\"* ]]; then
		text=${text#*\"}
		text=${text%%\"*}
	elif [[ $text == *\'*\'* ]]; then
		text=${text#*\'}
		text=${text%%\'*}
	fi
	printf "ROT13 of '%s' is '%s'" "$text" "$(tr 'A-Za-z' 'N-ZA-Mn-za-m' <<<"$text")"
}

# STATE keeps one file per chat naming its launcher, taken from the chat's
# start message: handle runs in a subshell, so nothing it sets survives it.
STATE=$(mktemp -d)

# handle MESSAGE acts on one logged chat message from the inbox.
handle() {
	local -A m=()
	local k v
	while IFS=$'\t' read -r k v; do m[$k]=$v; done < <(flatten "$1")
	str() { local t=${m["$1"]-}; [[ $t == \"*\" ]] && t=$(unjson "$t"); printf '%s' "$t"; }
	local type comm seq i id desc result
	type=$(str .type) comm=$(str .comm_id) seq=$(str .seq)
	[[ $comm =~ ^[A-Za-z0-9_-]{1,64}$ ]] || return
	log "chat $comm #$seq: $type from $(str .sender)"
	if [[ $type == system && $(str .event) == start ]]; then
		str .launcher >"$STATE/$comm"
	fi
	if [[ $type == sync_task_assign || $type == async_task_assign ]]; then
		for ((i = 0; ${#m[".tasks[$i].task_id"]} > 0; i++)); do
			[[ $(str ".tasks[$i].assignee") == "$NAME" ]] || continue
			id=$(str ".tasks[$i].task_id")
			desc=$(str ".tasks[$i].task_desc")
			# The referee sends an assignment again (a nudge, a hand-back):
			# this process does each task once.
			[[ -e $STATE/$comm.$id.taken ]] && continue
			: >"$STATE/$comm.$id.taken"
			if [[ $type == async_task_assign ]]; then
				send "$comm" '{"v":1,"id":'"$(json_str "$NAME-$comm-$id-progress")"',"type":"task_progress","task_id":'"$(json_str "$id")"',"content":"working on it"}'
			fi
			((WORK_DELAY > 0)) && sleep "$WORK_DELAY"
			result=$(work "$desc")
			send "$comm" '{"v":1,"id":'"$(json_str "$NAME-$comm-$id-result")"',"type":"task_result","task_id":'"$(json_str "$id")"',"task_status":"completed","task_conclusion":'"$(json_str "$result")"'}'
		done
	fi
	# The turn is mine in a discussion: nothing to add, so hand it back.
	if [[ $(str .state) == discussion && $(str '.next_speaker[0]') == "$NAME" ]]; then
		local to
		to=$(cat "$STATE/$comm" 2>/dev/null)
		[[ -n $to ]] || to=$(str .sender)
		send "$comm" '{"v":1,"id":'"$(json_str "$NAME-$comm-$seq-turn")"',"type":"discussion","content":'"$(json_str "$NAME: ready, I encode and decode ROT13")"',"next_speaker":['"$(json_str "$to")"']}'
	fi
}

# stop RC ends the agent: its nats processes first, then its card.
PIDS=()
REGISTERED=0
stop() {
	trap - EXIT INT TERM
	((${#PIDS[@]})) && kill "${PIDS[@]}" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$STATE"
	if ((REGISTERED)); then
		req "$P.registry.deregister.$NAME" '{"name":'"$(json_str "$NAME")"'}' >/dev/null
		log "deregistered; bye"
	fi
	exit "$1"
}
trap 'stop $?' EXIT
trap 'stop 0' INT TERM

[[ $NAME =~ ^[a-z0-9][a-z0-9_-]{0,63}$ ]] || { log "AGENT_NAME must match ^[a-z0-9][a-z0-9_-]{0,63}$"; exit 2; }
command -v "$NATS" >/dev/null || { log "the nats CLI is not installed (go install github.com/nats-io/natscli/nats@v0.5.0)"; exit 2; }

# Listen before registering, so that no invitation or message is missed:
# the inbox is ready when a probe sent to it comes back, the invitation
# server when it answers.
coproc INBOX { exec "${NATSCMD[@]}" subscribe --raw "$P.agent.$NAME.in.*" 2>/dev/null; }
PIDS+=("$INBOX_PID")
[[ -n ${INBOX[0]-} ]] || { log "cannot reach NATS at $NATS_URL"; exit 1; }
exec {IN}<&"${INBOX[0]}" # bash forgets INBOX when the coprocess ends
"${NATSCMD[@]}" reply "$P.agent.$NAME.invite" '{"accept":true}' >/dev/null 2>&1 &
PIDS+=($!)
for ((try = 0; ; try++)); do
	((try < 100)) || { log "cannot reach NATS at $NATS_URL"; exit 1; }
	n publish "$P.agent.$NAME.in.probe" '{"probe":true}' >/dev/null 2>&1
	IFS= read -r -t 0.2 line <&"$IN" && [[ $line == '{"probe":true}' ]] && break
done
until [[ $(req "$P.agent.$NAME.invite" '{}') == '{"accept":true}' ]]; do
	((try++ < 200)) || { log "the invitation server did not start"; exit 1; }
	sleep 0.1
done
register || exit 1
REGISTERED=1
heartbeats &
PIDS+=($!)
log "serving on $NATS_URL; Ctrl-C to stop"

while IFS= read -r line <&"$IN"; do
	# A subshell per message: the signal traps then run only here, between
	# messages, never in the middle of a command substitution.
	[[ $line == \{* ]] && (handle "$line")
done
log "inbox subscription ended"
