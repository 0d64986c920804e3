# The handler of the bash runtime's tests. BASH_FAIL chooses how it fails: error (returns 1),
# exit (the runtime dies mid-invocation), sleep (outlives any timeout); with BASH_FAIL_ONCE, only
# while the file it names exists (the first failure removes it). BASH_PIDS names a file that
# gets the runtime's PID on each invocation; BASH_DELAY sleeps that long first. BASH_CHILD names
# a file that gets the PID of a process the handler starts in a new session (setsid) before it
# fails; fail=env answers with the environment the runtime was started with (base64, from /proc).
handler() {
	EVENT_DATA=$1
	echo "handling $(echo "$EVENT_DATA" | grep -o '"eventID"' | wc -l) records in $$" 1>&2
	if [ -n "${BASH_PIDS:-}" ]; then echo "$$" >>"$BASH_PIDS"; fi
	if [ -n "${BASH_DELAY:-}" ]; then sleep "$BASH_DELAY"; fi
	fail="${BASH_FAIL:-}"
	if [ -n "${BASH_FAIL_ONCE:-}" ]; then
		if [ -f "$BASH_FAIL_ONCE" ]; then rm -f "$BASH_FAIL_ONCE"; else fail=""; fi
	fi
	if [ -n "${BASH_CHILD:-}" ]; then
		setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec sleep 300' "$BASH_CHILD" </dev/null >/dev/null 2>&1 &
		while [ ! -s "$BASH_CHILD" ]; do sleep 0.01; done
	fi
	case "$fail" in
	env) echo "{\"environ\":\"$(base64 -w0 </proc/$$/environ)\"}"; return 0 ;;
	error) echo "bad batch"; return 1 ;;
	exit) kill -KILL $$ ;;
	sleep) sleep 60 ;;
	esac
	echo '{"batchItemFailures":[]}'
}
