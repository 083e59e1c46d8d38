# Shell side of the fixture protocol (tests/lib/fixture.h is the C side),
# and the small test harness of the scripts/test-* suites.  Sourced by
# bash:
#
#   . tests/lib/fixture.sh
#   t_begin test-capture                 temp dir $T_TMP, cleanup on exit
#   fx_start jemalloc-target MALLOC_CONF=prof:true   (sets $FX_PID)
#   t_check "what" command...            one assertion
#   fx_assert_healthy                    alive, not stopped, answers "ok"
#   fx_stop
#   T_PIDS+=("$pid")                     anything else to kill at exit
#   t_forget "$pid"                      ... unless reaped already
#   t_end                                summary; exit 1 if any failed
#
# The fixture runs as a bash coprocess: its stdin is the command pipe
# (MEMSNAP_CONTROL_FD=0), its stdout the reply pipe (the default ready fd),
# so closing our end makes it exit by itself.
#
# Binaries as `make check` passes them (MEMSNAP_BIN, MEMSNAP_FIXTURES),
# else those scripts/test builds: ./memsnap and build/fixtures.

# shellcheck shell=bash

T_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MEMSNAP_BIN=${MEMSNAP_BIN:-$T_ROOT/memsnap}
MEMSNAP_FIXTURES=${MEMSNAP_FIXTURES:-$T_ROOT/build/fixtures}
T_NAME=
T_TMP=
T_FAILED=0
T_PASSED=0
FX_PID=
FX_WHY=

t_begin() {
	T_NAME=$1
	T_TMP=$(mktemp -d "/tmp/memsnap-$T_NAME.XXXXXX")
	trap t_cleanup EXIT
	trap 'exit 130' INT TERM
}

# Other processes a suite started: killed (SIGKILL) and reaped at exit.
# t_forget one once it is reaped, so that its pid, maybe reused by then,
# is never killed.
T_PIDS=()

t_forget() {
	local pid keep=()

	for pid in "${T_PIDS[@]}"; do
		[ "$pid" = "$1" ] || keep+=("$pid")
	done
	T_PIDS=("${keep[@]}")
}

t_cleanup() {
	local pid

	fx_stop
	for pid in "${T_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	[ -n "$T_TMP" ] && rm -rf "$T_TMP"
}

t_pass() {
	T_PASSED=$((T_PASSED + 1))
	printf '  ok    %s\n' "$1"
}

t_fail() {
	T_FAILED=$((T_FAILED + 1))
	printf '  FAIL  %s\n' "$1"
	shift
	[ $# -gt 0 ] && printf '        %s\n' "$@"
	return 0
}

# t_check WHAT COMMAND...: passes when COMMAND succeeds.
t_check() {
	local what=$1

	shift
	if "$@"; then
		t_pass "$what"
	else
		t_fail "$what" "failed: $*"
	fi
}

# t_skip WHY: the whole suite cannot run here.  A skip is not a pass: it
# says so and why, and exits 0 only so that the other suites still run.
t_skip() {
	printf '%s: SKIP: %s\n' "$T_NAME" "$1"
	exit 0
}

t_end() {
	printf '%s: %d passed, %d failed\n' "$T_NAME" "$T_PASSED" "$T_FAILED"
	[ "$T_FAILED" = 0 ]
}

# Wait until COMMAND succeeds, polling, for at most SECONDS.
t_wait_for() {
	local seconds=$1 deadline

	shift
	deadline=$((SECONDS + seconds))
	until "$@"; do
		[ "$SECONDS" -ge "$deadline" ] && return 1
		sleep 0.05
	done
}

# fx_start NAME [VAR=VALUE...] [-- ARG...]: start $MEMSNAP_FIXTURES/NAME
# with those variables and wait (10 s at most) for its ready line.
fx_start() {
	local path=$MEMSNAP_FIXTURES/$1 line

	shift
	local env=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		env+=("$1")
		shift
	done
	[ "${1:-}" = -- ] && shift
	[ -x "$path" ] || { echo "fixture $path: not built" >&2; return 1; }
	coproc FX { exec env MEMSNAP_CONTROL_FD=0 "${env[@]}" "$path" "$@"; }
	if ! read -r -t 10 line <&"${FX[0]}" || [ "${line%% *}" != R ]; then
		echo "fixture $path: no ready line (got '${line:-}')" >&2
		fx_stop
		return 1
	fi
	FX_READY=${line#R }
}

# The state letter of the fixture in /proc/PID/stat ('?' if gone).
fx_state() {
	local stat

	stat=$(cat "/proc/$FX_PID/stat" 2>/dev/null) || { echo '?'; return; }
	stat=${stat##*) }
	echo "${stat%% *}"
}

# Alive, not stopped, and answering "ok" to a ping (the fixture checks
# its own invariants).  Why not in $FX_WHY.  Not in a subshell: the
# coprocess pipes are the calling shell's.
fx_healthy() {
	local state reply

	FX_WHY=
	state=$(fx_state)
	case $state in
	'?' | Z | X) FX_WHY="fixture $FX_PID is gone ($state)"; return 1 ;;
	T | t) FX_WHY="fixture $FX_PID is stopped ($state)"; return 1 ;;
	esac
	if ! printf p >&"${FX[1]}"; then
		FX_WHY="fixture $FX_PID: ping not sent"
		return 1
	fi
	if ! read -r -t 90 reply <&"${FX[0]}"; then
		FX_WHY="fixture $FX_PID: no answer to a ping"
		return 1
	fi
	[ "$reply" = ok ] && return 0
	FX_WHY="fixture $FX_PID: $reply"
	return 1
}

fx_assert_healthy() {
	if fx_healthy; then
		t_pass "${1:-fixture} unharmed"
	else
		t_fail "${1:-fixture} unharmed" "$FX_WHY"
	fi
}

# SIGKILL and reap; safe to call twice.
fx_stop() {
	[ -n "$FX_PID" ] || return 0
	kill -KILL "$FX_PID" 2>/dev/null
	wait "$FX_PID" 2>/dev/null
	FX_PID=
	return 0
}
