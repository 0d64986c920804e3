#!/usr/bin/env bash
# emulators.sh: start, stop or inspect the local AWS emulators used by the tests.
#
#   scripts/emulators.sh start    install (npm ci) if needed, build ddb-local, start
#                                 kinesis-local, dynalite and ddb-local on 127.0.0.1,
#                                 wait for their ports and write .emulators/env
#   scripts/emulators.sh stop     stop whatever start started (safe to repeat)
#   scripts/emulators.sh status   show what is running; exit 0 only if all three are
#
# Ports (environment overrides):
#   ESM_KINESIS_PORT      kinesis-local plain HTTP   (default 14568)
#   ESM_KINESIS_TLS_PORT  kinesis-local HTTPS / h2   (default 14567)
#   ESM_DYNAMODB_PORT     dynalite                   (default 14570)
#   ESM_DDBSTREAMS_PORT   ddb-local                  (default 14571)
#
# ddb-local (fake/cmd/ddb-local) is esm's own DynamoDB with DynamoDB Streams
# (no emulator that can be installed here serves the Streams API); it is built
# with go into .emulators/bin. ESM_DDB_ROTATE sets how long its stream shards
# stay open (default 4h, as on AWS).
#
# Runtime files live in .emulators/: <name>.pid, <name>.log and env, which
# holds "export ESM_TEST_KINESIS_ENDPOINT=..." lines that both make and a
# shell can read.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run_dir="$repo/.emulators"
env_file="$run_dir/env"
preload="$repo/.ci/force-loopback.js"

kinesis_port="${ESM_KINESIS_PORT:-14568}"
kinesis_tls_port="${ESM_KINESIS_TLS_PORT:-14567}"
dynamodb_port="${ESM_DYNAMODB_PORT:-14570}"
ddb_port="${ESM_DDBSTREAMS_PORT:-14571}"
ddb_rotate="${ESM_DDB_ROTATE:-4h}"
ddb_bin="$run_dir/bin/ddb-local"

ready_timeout_s=20
stop_grace_s=3

log() { printf 'emulators: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# now_ms prints the current time in milliseconds.
now_ms() {
	local us="${EPOCHREALTIME/[.,]/}"
	printf '%s\n' "$((us / 1000))"
}

# port_open PORT succeeds if something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
	timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# running_pid NAME PATH prints the PID recorded for NAME and succeeds if that
# process is alive and its command line still names PATH (guards against PID reuse).
running_pid() {
	local pid_file="$run_dir/$1.pid" pid
	[[ -f "$pid_file" ]] || return 1
	pid="$(<"$pid_file")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	ps -p "$pid" -o args= 2>/dev/null | grep -qF -- "$2" || return 1
	printf '%s\n' "$pid"
}

# ensure_installed runs npm ci when node_modules is missing or older than the lockfile.
ensure_installed() {
	local marker="$repo/node_modules/.package-lock.json"
	if [[ ! -f "$marker" || "$repo/package-lock.json" -nt "$marker" ||
		! -f "$repo/node_modules/kinesis-local/main.js" ||
		! -f "$repo/node_modules/dynalite/cli.js" ]]; then
		log "installing emulators (npm ci)"
		(cd "$repo" && npm ci --no-audit --no-fund </dev/null >&2)
	fi
}

# check_free NAME PATH PORT... fails with a clear message if NAME is not
# already running from a previous start and one of its ports is taken.
check_free() {
	local name="$1" module="$2" port
	shift 2
	if running_pid "$name" "$module" >/dev/null; then
		return 0
	fi
	for port in "$@"; do
		if port_open "$port"; then
			die "$name: port $port on 127.0.0.1 is already in use by another process; stop it or pick other ports with ESM_KINESIS_PORT, ESM_KINESIS_TLS_PORT, ESM_DYNAMODB_PORT"
		fi
	done
}

# launch NAME PATH PORT -- COMMAND... starts COMMAND in its own session
# with its output in NAME.log, and waits until PORT accepts connections.
# It does nothing if NAME is already running from a previous start.
#
# Only the plain port is probed: kinesis-local never closes a connection to
# its TLS port that ends before the handshake, and such a connection makes it
# ignore SIGTERM. It opens both ports together.
launch() {
	local name="$1" module="$2" port="$3"
	[[ "$4" == "--" ]] || die "launch: bad arguments"
	shift 4

	local started pid
	if pid="$(running_pid "$name" "$module")"; then
		log "$name already running (pid $pid)"
		return 0
	fi
	rm -f "$run_dir/$name.pid"

	started="$(now_ms)"
	setsid "$@" </dev/null >"$run_dir/$name.log" 2>&1 &
	pid=$!
	printf '%s\n' "$pid" >"$run_dir/$name.pid"

	local deadline=$((started + ready_timeout_s * 1000))
	until port_open "$port"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "$name exited during start; last lines of $run_dir/$name.log:"
			tail -n 20 "$run_dir/$name.log" >&2 || true
			return 1
		fi
		if (($(now_ms) > deadline)); then
			log "$name: port $port did not accept within ${ready_timeout_s}s; see $run_dir/$name.log"
			return 1
		fi
		sleep 0.05
	done
	log "$name ready on 127.0.0.1:$port (pid $pid, $(($(now_ms) - started)) ms)"
}

start() {
	command -v node >/dev/null || die "node not found in PATH (need Node >= 20)"
	command -v npm >/dev/null || die "npm not found in PATH"
	mkdir -p "$run_dir"
	ensure_installed
	[[ -f "$preload" ]] || die "missing $preload"
	command -v go >/dev/null || die "go not found in PATH (ddb-local is built with it)"
	check_free kinesis-local node_modules/kinesis-local/ "$kinesis_port" "$kinesis_tls_port"
	check_free dynalite node_modules/dynalite/ "$dynamodb_port"
	check_free ddb-local "$ddb_bin" "$ddb_port"
	log "building ddb-local"
	mkdir -p "$run_dir/bin"
	(cd "$repo/fake" && go build -o "$ddb_bin" ./cmd/ddb-local) || die "building ddb-local failed"

	local ok=1
	launch kinesis-local node_modules/kinesis-local/ "$kinesis_port" -- \
		env \
		KINESIS_MOCK_PLAIN_PORT="$kinesis_port" \
		KINESIS_MOCK_TLS_PORT="$kinesis_tls_port" \
		KINESIS_MOCK_CERT_PATH="$repo/node_modules/kinesis-local/server.json" \
		NODE_OPTIONS="--require \"$preload\"" \
		AWS_REGION=us-east-1 \
		AWS_ACCOUNT_ID=000000000000 \
		CREATE_STREAM_DURATION=100ms \
		DELETE_STREAM_DURATION=100ms \
		SPLIT_SHARD_DURATION=100ms \
		MERGE_SHARDS_DURATION=100ms \
		UPDATE_SHARD_COUNT_DURATION=100ms \
		UPDATE_STREAM_MODE_DURATION=100ms \
		REGISTER_STREAM_CONSUMER_DURATION=100ms \
		DEREGISTER_STREAM_CONSUMER_DURATION=100ms \
		START_STREAM_ENCRYPTION_DURATION=100ms \
		STOP_STREAM_ENCRYPTION_DURATION=100ms \
		SHARD_LIMIT=10000 \
		node "$repo/node_modules/kinesis-local/main.js" || ok=0

	if ((ok)); then
		launch dynalite node_modules/dynalite/ "$dynamodb_port" -- \
			env NODE_OPTIONS="--require \"$preload\"" \
			node "$repo/node_modules/dynalite/cli.js" \
			--host 127.0.0.1 --port "$dynamodb_port" \
			--createTableMs 50 --deleteTableMs 50 --updateTableMs 50 || ok=0
	fi
	if ((ok)); then
		launch ddb-local "$ddb_bin" "$ddb_port" -- \
			"$ddb_bin" -host 127.0.0.1 -port "$ddb_port" -rotate "$ddb_rotate" \
			-region us-east-1 -account 000000000000 || ok=0
	fi

	if ((!ok)); then
		stop
		exit 1
	fi

	cat >"$env_file.tmp" <<EOF
export ESM_TEST_KINESIS_ENDPOINT=http://127.0.0.1:$kinesis_port
export ESM_TEST_KINESIS_TLS_ENDPOINT=https://127.0.0.1:$kinesis_tls_port
export ESM_TEST_DYNAMODB_ENDPOINT=http://127.0.0.1:$dynamodb_port
export ESM_TEST_DDBSTREAMS_ENDPOINT=http://127.0.0.1:$ddb_port
EOF
	mv "$env_file.tmp" "$env_file"
	log "wrote $env_file"
}

# stop sends TERM to each running emulator's process group, sends KILL to
# whatever is still alive after the grace period, and removes the PID files.
# Emulator state is in memory only, so KILL loses nothing worth keeping.
stop() {
	[[ -d "$run_dir" ]] || return 0
	local pids=() names=() pid name i
	local -A path=([kinesis-local]=node_modules/kinesis-local/ [dynalite]=node_modules/dynalite/ [ddb-local]="$ddb_bin")
	for name in kinesis-local dynalite ddb-local; do
		if pid="$(running_pid "$name" "${path[$name]}")"; then
			# setsid made each emulator a session and group leader: signal the group.
			kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
			names+=("$name")
		fi
	done

	local waited=0 alive
	while ((waited < stop_grace_s * 10)); do
		alive=0
		for pid in "${pids[@]}"; do
			if kill -0 "$pid" 2>/dev/null; then
				alive=1
			fi
		done
		((alive)) || break
		sleep 0.1
		waited=$((waited + 1))
	done

	for i in "${!pids[@]}"; do
		pid="${pids[$i]}"
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
			log "${names[$i]} killed (pid $pid, no exit ${stop_grace_s}s after TERM)"
		else
			log "${names[$i]} stopped (pid $pid)"
		fi
	done
	rm -f "$run_dir/kinesis-local.pid" "$run_dir/dynalite.pid" "$run_dir/ddb-local.pid" "$env_file"
}

status() {
	local rc=0 pid
	if pid="$(running_pid kinesis-local node_modules/kinesis-local/)"; then
		echo "kinesis-local running (pid $pid) on 127.0.0.1:$kinesis_port"
	else
		echo "kinesis-local not running"
		rc=3
	fi
	if pid="$(running_pid dynalite node_modules/dynalite/)"; then
		echo "dynalite running (pid $pid) on 127.0.0.1:$dynamodb_port"
	else
		echo "dynalite not running"
		rc=3
	fi
	if pid="$(running_pid ddb-local "$ddb_bin")"; then
		echo "ddb-local running (pid $pid) on 127.0.0.1:$ddb_port"
	else
		echo "ddb-local not running"
		rc=3
	fi
	return "$rc"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
