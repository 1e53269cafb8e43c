#!/usr/bin/env bash
# The deployment smoke test: checks a Playground MCP endpoint end to end, as
# a client sees it, with one tenant's token.
#
#   hack/smoke.sh --endpoint URL --token TOKEN [--cancel-proof]
#   PLAYGROUND_ENDPOINT=URL PLAYGROUND_TOKEN=TOKEN hack/smoke.sh [--cancel-proof]
#
# Prefer PLAYGROUND_TOKEN to --token: a command line is visible to every user
# of the machine (ps). The token is never printed. For an https:// endpoint
# with a private CA, set CURL_CA_BUNDLE=ca.pem.
#
# Steps, each printing PASS or FAIL (with the server's message):
#   1. a request without a token, and one with a wrong token, get 401
#   2. initialize (and notifications/initialized) succeeds and names the server
#   3. tools/list returns exactly the eight tools
#   4. open_session returns a handle and a sandbox ID; exec prints a marker, exit 0
#   5. write then read round-trips a text file and a small binary file (SHA-256)
#   6. close_session, then open_session returns the same sandbox ID
#   7. (--cancel-proof) job_cancel kills a detached descendant that ignores
#      SIGTERM, while a sentinel process started earlier by exec survives
#   8. (--isolation) inside the sandbox: PID 1 is the sandbox's own init, the
#      only network interface is lo, the pile refuses truncation but takes
#      an append; with --not-visible PATH (repeatable), PATH (a file of the
#      node's) is not there; with --other-kernel, uname -r is not this
#      machine's (for a gvisor or vm sandbox served from this machine)
#   9. (--os-release ID) the sandbox's system is an image's: the ID of its
#      /etc/os-release is ID
# and ends with the line 'N passed, N failed'. The exit status is 0 only when
# nothing failed (2 for a usage error or a missing tool).
#
# Environment: SMOKE_REQUEST_TIMEOUT (seconds per HTTP request, default 120),
# SMOKE_RETRY_SECONDS (how long a 503 of a gateway whose credential view is
# not current yet is retried, default 30).
#
# Needs bash, curl, jq and coreutils (Debian: apt-get install curl jq).
set -uo pipefail

usage() {
	sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"
}

ENDPOINT=${PLAYGROUND_ENDPOINT:-}
TOKEN=${PLAYGROUND_TOKEN:-}
CANCEL_PROOF=0
ISOLATION=0
OTHER_KERNEL=0
OS_RELEASE=""
NOT_VISIBLE=()
while [ $# -gt 0 ]; do
	case $1 in
	--endpoint) [ $# -ge 2 ] || { echo "smoke: --endpoint needs a URL" >&2; exit 2; }; ENDPOINT=$2; shift 2 ;;
	--endpoint=*) ENDPOINT=${1#*=}; shift ;;
	--token) [ $# -ge 2 ] || { echo "smoke: --token needs a value" >&2; exit 2; }; TOKEN=$2; shift 2 ;;
	--token=*) TOKEN=${1#*=}; shift ;;
	--cancel-proof) CANCEL_PROOF=1; shift ;;
	--isolation) ISOLATION=1; shift ;;
	--other-kernel) OTHER_KERNEL=1; shift ;;
	--os-release) [ $# -ge 2 ] || { echo "smoke: --os-release needs an ID" >&2; exit 2; }; OS_RELEASE=$2; shift 2 ;;
	--os-release=*) OS_RELEASE=${1#*=}; shift ;;
	--not-visible) [ $# -ge 2 ] || { echo "smoke: --not-visible needs a path" >&2; exit 2; }; NOT_VISIBLE+=("$2"); shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "smoke: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
if [ -z "$ENDPOINT" ] || [ -z "$TOKEN" ]; then
	echo "smoke: an endpoint and a token are required: --endpoint URL and PLAYGROUND_TOKEN (or --token); see --help" >&2
	exit 2
fi
case $ENDPOINT in
http://* | https://*) ;;
*) echo "smoke: the endpoint must be an http:// or https:// URL, e.g. http://127.0.0.1:7080/mcp" >&2; exit 2 ;;
esac

missing=()
for c in curl jq; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
for c in sha256sum base64 od mktemp tr; do command -v "$c" >/dev/null 2>&1 || { missing+=(coreutils); break; }; done
if [ ${#missing[@]} -gt 0 ]; then
	echo "smoke: missing ${missing[*]}; on Debian or Ubuntu: sudo apt-get install -y ${missing[*]}" >&2
	exit 2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/playground-smoke.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
# The token goes to curl in a header file (mode 0600), never on a command line.
(umask 077 && printf 'Authorization: Bearer %s\n' "$TOKEN" >"$TMP/auth")
MARK=smoke-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && printf 'Authorization: Bearer pgt_not-a-token-%s\n' "${MARK#smoke-}" >"$TMP/wrongauth")

REQUEST_TIMEOUT=${SMOKE_REQUEST_TIMEOUT:-120} # seconds per HTTP request
RETRY_503=${SMOKE_RETRY_SECONDS:-30}          # how long to retry 503 (credential view not current yet)
EXPECTED_TOOLS="close_session exec job_cancel job_exec job_poll open_session read write"

PASSED=0
FAILED=0
redact() {
	local s=$1
	s=${s//"$TOKEN"/<token>}
	printf '%s' "$s"
}
# one line, at most 600 characters, token removed
oneline() {
	local s
	s=$(redact "$1" | tr '\r\n\t' '   ')
	[ ${#s} -le 600 ] || s="${s:0:600}..."
	printf '%s' "$s"
}
pass() { PASSED=$((PASSED + 1)); printf 'PASS  %s\n' "$(oneline "$*")"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL  %s\n' "$(oneline "$*")"; }
note() { printf '      %s\n' "$(oneline "$*")"; }
step() { printf -- '--- %s\n' "$*"; }

# --- HTTP and JSON-RPC ---------------------------------------------------------

PROTO=""   # the negotiated protocol version, sent as Mcp-Protocol-Version
SESSION="" # Mcp-Session-Id, when the server keeps sessions (stateful mode)
RPC_ID=0

# header NAME: a header of the last response
header() {
	grep -i "^$1:" "$TMP/headers" 2>/dev/null | tail -n 1 | cut -d: -f2- | sed 's/^[[:space:]]*//; s/\r$//'
}

body_excerpt() {
	if [ -s "$TMP/body" ]; then head -c 2000 "$TMP/body"; else printf '(empty body)'; fi
}

# http_post JSON [AUTH] [TIMEOUT]: POSTs JSON to the endpoint with AUTH
# (token, none or wrong); sets HTTP_STATUS, the response in $TMP/body and
# $TMP/headers. Returns 1, with ERRMSG, when there was no HTTP response. A
# 503 (the gateway's credential view is not current yet) is retried for up
# to RETRY_503 seconds.
http_post() {
	local json=$1 auth=${2:-token} timeout=${3:-$REQUEST_TIMEOUT} deadline=$((SECONDS + RETRY_503)) wait
	printf '%s' "$json" >"$TMP/req"
	local args=(-sS -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' --max-time "$timeout"
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
		--data-binary @"$TMP/req")
	case $auth in
	token) args+=(-H @"$TMP/auth") ;;
	wrong) args+=(-H @"$TMP/wrongauth") ;;
	esac
	[ -z "$PROTO" ] || args+=(-H "Mcp-Protocol-Version: $PROTO")
	[ -z "$SESSION" ] || args+=(-H "Mcp-Session-Id: $SESSION")
	while :; do
		: >"$TMP/body"
		: >"$TMP/headers"
		if ! HTTP_STATUS=$(curl "${args[@]}" "$ENDPOINT" 2>"$TMP/curlerr"); then
			ERRMSG="no HTTP response from $ENDPOINT: $(cat "$TMP/curlerr")"
			return 1
		fi
		[ "$HTTP_STATUS" = 503 ] && [ $SECONDS -lt $deadline ] || return 0
		wait=$(header Retry-After)
		[[ $wait =~ ^[0-9]+$ ]] && [ "$wait" -ge 1 ] && [ "$wait" -le 5 ] || wait=2
		note "503 from the gateway, retrying in ${wait}s: $(body_excerpt)"
		sleep "$wait"
	done
}

# messages: the JSON-RPC messages of the last response, one compact JSON per
# line, whether it came as application/json or as a text/event-stream
# (SSE events' data lines are joined; JSON needs no newline to be valid).
messages() {
	local ctype
	ctype=$(header Content-Type | tr '[:upper:]' '[:lower:]')
	case $ctype in
	text/event-stream*)
		tr -d '\r' <"$TMP/body" | awk '
			/^data:/ { line = substr($0, 6); sub(/^ /, "", line); data = has ? data " " line : line; has = 1; next }
			/^$/ { if (has) print data; data = ""; has = 0 }
			END { if (has) print data }'
		;;
	*) jq -c . "$TMP/body" 2>/dev/null ;;
	esac | jq -R -c 'fromjson? | if type == "array" then .[] else . end | select(type == "object")'
}

# rpc METHOD PARAMS [TIMEOUT]: a JSON-RPC call. Returns 0 with its response
# message in RESP when it has a result; 1 with ERRMSG otherwise.
rpc() {
	local method=$1 params=$2 timeout=${3:-$REQUEST_TIMEOUT} req ctype
	RPC_ID=$((RPC_ID + 1))
	RESP=""
	req=$(jq -cn --arg m "$method" --argjson p "$params" --argjson id "$RPC_ID" '{jsonrpc: "2.0", id: $id, method: $m, params: $p}') || {
		ERRMSG="cannot build the request (a bug in smoke.sh)"
		return 1
	}
	http_post "$req" token "$timeout" || return 1
	ctype=$(header Content-Type)
	RESP=$(messages | jq -c -n --argjson id "$RPC_ID" 'first(inputs | select(.id == $id)) // empty')
	if [ "$HTTP_STATUS" != 200 ]; then
		if [ -n "$RESP" ] && jq -e '.error' <<<"$RESP" >/dev/null 2>&1; then
			ERRMSG="HTTP $HTTP_STATUS, JSON-RPC error $(jq -r '.error | "\(.code): \(.message)"' <<<"$RESP")"
		else
			ERRMSG="HTTP $HTTP_STATUS: $(body_excerpt)"
		fi
		return 1
	fi
	if [ -z "$RESP" ]; then
		ERRMSG="no JSON-RPC response with id $RPC_ID in the answer (Content-Type: ${ctype:-none}): $(body_excerpt)"
		return 1
	fi
	if jq -e 'has("error")' <<<"$RESP" >/dev/null; then
		ERRMSG="JSON-RPC error $(jq -r '.error | "\(.code): \(.message)\(if .data then " \(.data | tojson)" else "" end)"' <<<"$RESP")"
		return 1
	fi
	if ! jq -e 'has("result")' <<<"$RESP" >/dev/null; then
		ERRMSG="the response has neither result nor error: $RESP"
		return 1
	fi
	return 0
}

# tool NAME ARGS [TIMEOUT]: a tools/call. Returns 0 with the result in RESULT
# and its structuredContent in OUT; 1 with ERRMSG (a tool error is
# "tool error: <code>: <message>", its code also in TOOL_CODE).
tool() {
	local name=$1 arguments=$2 timeout=${3:-$REQUEST_TIMEOUT}
	RESULT=""
	OUT=""
	TOOL_CODE=""
	rpc tools/call "$(jq -cn --arg n "$name" --argjson a "$arguments" '{name: $n, arguments: $a}')" "$timeout" || return 1
	RESULT=$(jq -c '.result' <<<"$RESP")
	if [ "$(jq -r '.isError // false' <<<"$RESULT")" = true ]; then
		ERRMSG="tool error: $(jq -r '[.content[]? | select(.type == "text") | .text] | join(" ")' <<<"$RESULT")"
		TOOL_CODE=$(jq -r '[.content[]? | select(.type == "text") | .text] | first // "" | split(":") | first // ""' <<<"$RESULT")
		return 1
	fi
	OUT=$(jq -c '.structuredContent // empty | select(type == "object")' <<<"$RESULT")
	if [ -z "$OUT" ]; then
		ERRMSG="the $name result has no structuredContent object: $RESULT"
		return 1
	fi
	return 0
}

# field JSONPATH: a field of OUT, raw
field() { jq -r "$1" <<<"$OUT"; }

# run COMMAND: exec COMMAND in the session; 0 with OUT when the call worked
# (whatever the command's exit code).
run() { tool exec "$(jq -cn --arg h "$HANDLE" --arg c "$1" '{handle: $h, command: $c, timeout_seconds: 60}')"; }

stdout_of() { jq -r 'if .stdout_encoding == "base64" then "(base64) " + .stdout else .stdout end' <<<"$OUT"; }
stderr_of() { jq -r 'if .stderr_encoding == "base64" then "(base64) " + .stderr else .stderr end' <<<"$OUT"; }
# what the last run did: its exit code and output, or why the call failed
ran() {
	if [ -n "$OUT" ]; then
		printf "exit code %s, stdout '%s', stderr '%s'" "$(field .exit_code)" "$(stdout_of)" "$(stderr_of)"
	else
		printf '%s' "$ERRMSG"
	fi
}

# open_session: returns 0 with HANDLE and SANDBOX_ID; retries "unavailable"
# (the sandbox is starting) for up to a minute.
open_session() {
	local deadline=$((SECONDS + 60))
	while :; do
		if tool open_session '{}'; then
			HANDLE=$(field '.handle // empty')
			SANDBOX_ID=$(field '.sandbox_id // empty')
			if [ -z "$HANDLE" ] || [ -z "$SANDBOX_ID" ]; then
				ERRMSG="open_session returned no handle or no sandbox_id: $OUT"
				return 1
			fi
			return 0
		fi
		[ "$TOOL_CODE" = unavailable ] && [ $SECONDS -lt $deadline ] || return 1
		note "open_session: $ERRMSG; retrying"
		sleep 3
	done
}

# --- cleanup of what the test left in the sandbox ------------------------------

HANDLE=""
SANDBOX_ID=""
SENTINEL=""
JOB_ID=""
JOB_DONE=0
FILES=()
cleanup_remote() {
	[ -n "$HANDLE" ] || return 0
	if [ -n "$JOB_ID" ] && [ "$JOB_DONE" = 0 ]; then
		tool job_cancel "$(jq -cn --arg j "$JOB_ID" '{job_id: $j}')" 30 >/dev/null 2>&1 || true
	fi
	local cmd=""
	[ -z "$SENTINEL" ] || cmd="kill $SENTINEL 2>/dev/null; "
	[ ${#FILES[@]} -eq 0 ] || cmd+="rm -f ${FILES[*]}"
	[ -z "$cmd" ] || run "$cmd" >/dev/null 2>&1 || true
	SENTINEL=""
	FILES=()
	tool close_session "$(jq -cn --arg h "$HANDLE" '{handle: $h}')" 30 >/dev/null 2>&1 || true
	HANDLE=""
}
# end_session: a stateful server's transport session is ended (DELETE).
end_session() {
	[ -n "$SESSION" ] || return 0
	curl -sS -o /dev/null --max-time 10 -X DELETE -H @"$TMP/auth" -H "Mcp-Session-Id: $SESSION" \
		${PROTO:+-H "Mcp-Protocol-Version: $PROTO"} "$ENDPOINT" 2>/dev/null || true
	SESSION=""
}
# shellcheck disable=SC2317 # called by the trap
interrupted() {
	echo "smoke: interrupted; cleaning up" >&2
	cleanup_remote
	end_session
	exit 130
}
trap interrupted INT TERM

summary() {
	cleanup_remote
	end_session
	echo
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
	exit
}

echo "Playground smoke test of $ENDPOINT (marker $MARK)"

# --- 1. authentication -------------------------------------------------------------

step "1. authentication"
INIT=$(jq -cn '{jsonrpc: "2.0", id: 0, method: "initialize", params: {protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "playground-smoke", version: "1"}}}')
if http_post "$INIT" none 30; then
	auth=$(header WWW-Authenticate)
	if [ "$HTTP_STATUS" = 401 ] && [[ ${auth,,} == bearer* ]]; then
		pass "a request without a token is refused: 401, WWW-Authenticate: $auth"
	else
		fail "a request without a token: want 401 with WWW-Authenticate: Bearer, got HTTP $HTTP_STATUS, WWW-Authenticate: '${auth}': $(body_excerpt)"
	fi
else
	fail "a request without a token: $ERRMSG"
fi
if http_post "$INIT" wrong 30; then
	if [ "$HTTP_STATUS" = 401 ]; then
		pass "a request with a wrong token is refused: 401 ($(body_excerpt))"
	else
		fail "a request with a wrong token: want 401, got HTTP $HTTP_STATUS: $(body_excerpt)"
	fi
else
	fail "a request with a wrong token: $ERRMSG"
fi

# --- 2. initialize ---------------------------------------------------------------------

step "2. initialize"
if rpc initialize "$(jq -c .params <<<"$INIT")" 30; then
	name=$(jq -r '.result.serverInfo.name // empty' <<<"$RESP")
	PROTO=$(jq -r '.result.protocolVersion // empty' <<<"$RESP")
	SESSION=$(header Mcp-Session-Id)
	if [ -n "$name" ] && [ -n "$PROTO" ]; then
		pass "initialize: server $(jq -r '.result.serverInfo | "\(.name) \(.version // "")\(if .title then " (\(.title))" else "" end)"' <<<"$RESP"), protocol $PROTO$([ -z "$SESSION" ] || echo ", session kept by the server")"
	else
		fail "initialize: the result names no server or protocol version: $(jq -c .result <<<"$RESP")"
	fi
	if http_post '{"jsonrpc":"2.0","method":"notifications/initialized"}' token 30; then
		case $HTTP_STATUS in
		200 | 202 | 204) pass "notifications/initialized accepted (HTTP $HTTP_STATUS)" ;;
		*) fail "notifications/initialized: want 202, got HTTP $HTTP_STATUS: $(body_excerpt)" ;;
		esac
	else
		fail "notifications/initialized: $ERRMSG"
	fi
else
	fail "initialize: $ERRMSG"
	note "cannot go on without an MCP connection"
	summary
fi

# --- 3. tools/list -----------------------------------------------------------------------

step "3. tools/list"
names=()
cursor=""
listed=1
for _ in $(seq 1 20); do
	if ! rpc tools/list "$(jq -cn --arg c "$cursor" 'if $c == "" then {} else {cursor: $c} end')" 30; then
		fail "tools/list: $ERRMSG"
		listed=0
		break
	fi
	mapfile -t -O ${#names[@]} names < <(jq -r '.result.tools[]?.name' <<<"$RESP")
	cursor=$(jq -r '.result.nextCursor // empty' <<<"$RESP")
	[ -n "$cursor" ] || break
done
if [ $listed = 1 ]; then
	got=$(printf '%s\n' "${names[@]}" | sort | tr '\n' ' ' | sed 's/ $//')
	if [ "$got" = "$EXPECTED_TOOLS" ] && [ ${#names[@]} -eq 8 ]; then
		pass "tools/list: exactly the eight tools: $got"
	else
		fail "tools/list: want exactly '$EXPECTED_TOOLS', got ${#names[@]}: '$got'"
	fi
fi

# --- 4. open_session and exec -------------------------------------------------------------

step "4. open_session and exec"
if open_session; then
	pass "open_session: sandbox $SANDBOX_ID, a handle until $(field '.expires // "?"')"
else
	fail "open_session: $ERRMSG"
	note "cannot go on without a session"
	summary
fi
if run "echo $MARK"; then
	code=$(field .exit_code)
	out=$(stdout_of)
	if [ "$code" = 0 ] && [[ $out == *"$MARK"* ]]; then
		pass "exec 'echo $MARK': printed the marker, exit code 0, $(field .duration_ms) ms"
	else
		fail "exec 'echo $MARK': want the marker and exit code 0, got exit code $code, stdout '$out', stderr '$(stderr_of)'"
	fi
else
	fail "exec 'echo $MARK': $ERRMSG"
fi

# --- 5. write and read ---------------------------------------------------------------

step "5. write and read"
sha_of() { sha256sum | cut -d' ' -f1; }

TEXT_PATH=$MARK.txt
TEXT=$'Playground smoke test '"$MARK"$'\nUTF-8: \xc3\xa4\xc3\xb6\xc3\xbc \xe2\x9c\x93, tab:\t, and a final newline\n'
TEXT_SHA=$(printf '%s' "$TEXT" | sha_of)
FILES+=("$TEXT_PATH")
if tool write "$(jq -cn --arg h "$HANDLE" --arg p "$TEXT_PATH" --arg t "$TEXT" '{handle: $h, path: $p, text: $t}')"; then
	if [ "$(field .sha256)" = "$TEXT_SHA" ]; then
		pass "write text: $(field .path), $(field .size) bytes, sha256 matches"
	else
		fail "write text: sha256 $(field .sha256), want $TEXT_SHA ($OUT)"
	fi
	if tool read "$(jq -cn --arg h "$HANDLE" --arg p "$TEXT_PATH" '{handle: $h, path: $p}')"; then
		if [ "$(field .sha256)" = "$TEXT_SHA" ] && [ "$(field .content)" = text ] &&
			jq -e --arg t "$TEXT" '[.content[]? | select(.type == "text") | .text] | first == $t' <<<"$RESULT" >/dev/null; then
			pass "read text: the same $(field .size) bytes back ($(field .mime)), sha256 matches"
		else
			fail "read text: want content text with sha256 $TEXT_SHA and the text written, got $OUT, content $(jq -c .content <<<"$RESULT")"
		fi
	else
		fail "read text: $ERRMSG"
	fi
else
	fail "write text: $ERRMSG"
fi

BIN_PATH=$MARK.bin
printf '\000\001\002\003\377\376\375\200\201smoke\000binary\r\n\033%s\000' "$MARK" >"$TMP/bin"
BIN_SHA=$(sha_of <"$TMP/bin")
BIN_B64=$(base64 -w0 <"$TMP/bin")
FILES+=("$BIN_PATH")
if tool write "$(jq -cn --arg h "$HANDLE" --arg p "$BIN_PATH" --arg b "$BIN_B64" '{handle: $h, path: $p, base64: $b}')"; then
	if [ "$(field .sha256)" = "$BIN_SHA" ]; then
		pass "write binary (base64): $(field .path), $(field .size) bytes, sha256 matches"
	else
		fail "write binary: sha256 $(field .sha256), want $BIN_SHA ($OUT)"
	fi
	if tool read "$(jq -cn --arg h "$HANDLE" --arg p "$BIN_PATH" '{handle: $h, path: $p}')"; then
		got=$(jq -r 'first(.content[]? | if .type == "resource" then .resource.blob // empty elif .type == "image" then .data // empty else empty end) // empty' <<<"$RESULT" | base64 -d 2>/dev/null | sha_of)
		if [ "$(field .sha256)" = "$BIN_SHA" ] && [ "$got" = "$BIN_SHA" ]; then
			pass "read binary: the same $(field .size) bytes back as $(field .content) ($(field .mime)), sha256 of the decoded base64 matches"
		else
			fail "read binary: want sha256 $BIN_SHA in structuredContent and of the decoded content, got $OUT and $got; content $(jq -c '[.content[]? | .type]' <<<"$RESULT")"
		fi
	else
		fail "read binary: $ERRMSG"
	fi
else
	fail "write binary: $ERRMSG"
fi

# --- 6. close and reopen ---------------------------------------------------------

step "6. close_session and open_session again"
FIRST_SANDBOX=$SANDBOX_ID
if tool close_session "$(jq -cn --arg h "$HANDLE" '{handle: $h}')"; then
	if [ "$(field .closed)" = true ]; then
		pass "close_session: closed"
	else
		fail "close_session: want closed true, got $OUT"
	fi
else
	fail "close_session: $ERRMSG"
fi
HANDLE=""
if open_session; then
	if [ "$SANDBOX_ID" = "$FIRST_SANDBOX" ]; then
		pass "open_session again: the same sandbox $SANDBOX_ID"
	else
		fail "open_session again: sandbox $SANDBOX_ID, want the same as before, $FIRST_SANDBOX"
	fi
else
	fail "open_session again: $ERRMSG"
	note "cannot go on without a session"
	summary
fi

# --- 7. the cancellation proof ----------------------------------------------------

if [ $CANCEL_PROOF = 1 ]; then
	step "7. cancellation proof"
	ESCAPEE_FILE=/tmp/smoke-escapee-${MARK#smoke-}
	FILES+=("$ESCAPEE_FILE")
	proof=1
	if run 'setsid sleep 1000 >/dev/null 2>&1 & echo $!' && [ "$(field .exit_code)" = 0 ] && [[ $(stdout_of) =~ ^[0-9]+$ ]]; then
		SENTINEL=$(stdout_of)
		pass "exec started a sentinel process outside any job: pid $SENTINEL"
	else
		fail "exec of the sentinel: $(ran)"
		proof=0
	fi

	ESCAPEE=""
	if [ $proof = 1 ]; then
		cmd="rm -f $ESCAPEE_FILE; setsid sh -c 'trap \"\" TERM; sleep 1000' >/dev/null 2>&1 & echo \$! > $ESCAPEE_FILE.tmp && mv $ESCAPEE_FILE.tmp $ESCAPEE_FILE; sleep 1000"
		if tool job_exec "$(jq -cn --arg h "$HANDLE" --arg c "$cmd" '{handle: $h, command: $c}')"; then
			JOB_ID=$(field '.job_id // empty')
			pass "job_exec: job $JOB_ID ($(field .state)) starts a detached descendant that ignores SIGTERM"
		else
			fail "job_exec: $ERRMSG"
			proof=0
		fi
	fi

	if [ $proof = 1 ]; then
		deadline=$((SECONDS + 60))
		state=""
		while [ $SECONDS -lt $deadline ]; do
			if run "cat $ESCAPEE_FILE 2>/dev/null" && [[ $(stdout_of) =~ ^[0-9]+$ ]]; then
				ESCAPEE=$(stdout_of)
				break
			fi
			sleep 1
		done
		if tool job_poll "$(jq -cn --arg j "$JOB_ID" '{job_id: $j, wait_seconds: 0}')"; then
			state=$(field .state)
		else
			state="($ERRMSG)"
		fi
		if [ -n "$ESCAPEE" ] && [ "$state" = running ] && run "kill -0 $ESCAPEE" && [ "$(field .exit_code)" = 0 ]; then
			pass "the job has started: state running, escapee pid $ESCAPEE alive"
		else
			fail "the job has not started within a minute: escapee pid '${ESCAPEE}', job state $state"
			proof=0
		fi
	fi

	if [ $proof = 1 ]; then
		if tool job_cancel "$(jq -cn --arg j "$JOB_ID" '{job_id: $j}')"; then
			state=$(field .state)
			case $state in
			cancelling | killed) pass "job_cancel: state $state" ;;
			*) fail "job_cancel: want cancelling or killed, got $OUT" ;;
			esac
		else
			fail "job_cancel: $ERRMSG"
			proof=0
		fi
	fi

	if [ $proof = 1 ]; then
		deadline=$((SECONDS + 120))
		cursor=""
		done_=false
		while [ $SECONDS -lt $deadline ]; do
			if ! tool job_poll "$(jq -cn --arg j "$JOB_ID" --arg c "$cursor" '{job_id: $j, cursor: $c, wait_seconds: 5}')" 60; then
				break
			fi
			cursor=$(field '.next_cursor // ""')
			done_=$(field '.done // false')
			[ "$done_" = true ] && break
		done
		if [ "$done_" = true ]; then
			JOB_DONE=1
			if [ "$(field .state)" = killed ] && [ "$(field '.result.killed')" = true ]; then
				pass "job_poll: the job ended, state killed, result $(field '.result | tojson')"
			else
				fail "job_poll: the job ended, want state killed and result.killed true, got state $(field .state), result $(field '.result | tojson')"
			fi
			# acknowledge the final page so the agent recycles the job
			tool job_poll "$(jq -cn --arg j "$JOB_ID" --arg c "$cursor" '{job_id: $j, cursor: $c, wait_seconds: 0}')" >/dev/null 2>&1 ||
				note "the acknowledging job_poll: $ERRMSG"
		else
			fail "job_poll: the job did not reach a terminal state within 2 minutes: ${OUT:-$ERRMSG}"
		fi

		if run "kill -0 $ESCAPEE"; then
			if [ "$(field .exit_code)" != 0 ]; then
				pass "the escapee (pid $ESCAPEE) is gone: kill -0 fails ($(stderr_of | tr -d '\n'))"
			else
				run "cat /proc/$ESCAPEE/status 2>/dev/null | head -n 3; cat /proc/$ESCAPEE/cmdline 2>/dev/null | tr '\\0' ' '" >/dev/null 2>&1
				fail "the escapee (pid $ESCAPEE) survived job_cancel: kill -0 succeeds; $(stdout_of)"
			fi
		else
			fail "exec 'kill -0 $ESCAPEE': $ERRMSG"
		fi
	fi

	if [ -n "$SENTINEL" ]; then
		if run "kill -0 $SENTINEL"; then
			if [ "$(field .exit_code)" = 0 ]; then
				pass "the sentinel (pid $SENTINEL) is alive: job_cancel killed only the job's processes"
			else
				fail "the sentinel (pid $SENTINEL) is gone: kill -0 fails ($(stderr_of | tr -d '\n')); job_cancel killed more than the job"
			fi
		else
			fail "exec 'kill -0 $SENTINEL': $ERRMSG"
		fi
		if run "kill $SENTINEL" && [ "$(field .exit_code)" = 0 ]; then
			SENTINEL=""
			pass "the sentinel is killed"
		else
			fail "killing the sentinel (pid $SENTINEL): $(ran)"
		fi
	fi
fi

if [ $ISOLATION = 1 ]; then
	step "8. isolation"
	if run 'tr "\0" " " </proc/1/cmdline'; then
		case $(stdout_of) in
		*playground-sandbox*init*) pass "PID 1 is the sandbox's own init: $(stdout_of)" ;;
		*) fail "PID 1 is not the sandbox's init: $(ran)" ;;
		esac
	else
		fail "exec: $ERRMSG"
	fi
	if run "awk 'NR > 2 { sub(\":\", \"\", \$1); print \$1 }' /proc/net/dev | sort | tr '\n' ' '"; then
		if [ "$(stdout_of)" = "lo " ]; then
			pass "the only network interface is lo"
		else
			fail "network interfaces: want lo only, got $(ran)"
		fi
	else
		fail "exec: $ERRMSG"
	fi
	for p in "${NOT_VISIBLE[@]}"; do
		if run "test -e '$p' && echo visible || echo absent"; then
			if [ "$(stdout_of)" = absent ]; then
				pass "$p, a file of the node's, is not visible"
			else
				fail "$p, a file of the node's, is visible in the sandbox"
			fi
		else
			fail "exec: $ERRMSG"
		fi
	done
	if [ $OTHER_KERNEL = 1 ]; then
		local_kernel=$(uname -r)
		if run 'uname -r'; then
			got=$(stdout_of | tr -d '\n')
			if [ -n "$got" ] && [ "$got" != "$local_kernel" ]; then
				pass "the sandbox's kernel is its own: $got, not this machine's $local_kernel"
			else
				fail "uname -r in the sandbox: '$got', this machine's is '$local_kernel'"
			fi
		else
			fail "exec: $ERRMSG"
		fi
	fi
	# (the truncation in a subshell: a failed redirection of ':', a special
	# built-in, ends a POSIX shell)
	if run 'f=/pile/$(ls /pile | head -n 1); echo "$f"; echo '"$MARK"' >> "$f" && echo appended; (: > "$f") && echo truncated; tail -n 1 "$f"'; then
		out=$(stdout_of)
		case $out in
		*truncated*) fail "the pile's file was truncated: $(ran)" ;;
		*appended*"$MARK"*) pass "the pile takes an append and refuses truncation ($(stderr_of | tr -d '\n'))" ;;
		/pile/?*) pass "the pile refuses truncation, and appends too: it is read-only here, as under gVisor ($(stderr_of | tr -d '\n'))" ;;
		*) fail "the pile: $(ran)" ;;
		esac
	else
		fail "exec: $ERRMSG"
	fi
fi

if [ -n "$OS_RELEASE" ]; then
	if run '. /etc/os-release && echo "$ID"'; then
		got=$(stdout_of | tr -d '\n')
		if [ "$got" = "$OS_RELEASE" ]; then
			pass "the sandbox's system is its image's: /etc/os-release says ID=$got"
		else
			fail "the sandbox's /etc/os-release says ID='$got', want the image's $OS_RELEASE"
		fi
	else
		fail "exec: $ERRMSG"
	fi
fi

# --- the end ---------------------------------------------------------------------

summary
