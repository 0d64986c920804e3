# The handler of the bash runtime's tests. BASH_FAIL chooses how it fails: error (returns 1),
# exit (the runtime dies mid-invocation), sleep (outlives any timeout); with BASH_FAIL_ONCE, only
# while the file it names exists (the first failure removes it). BASH_PIDS names a file that
# gets the runtime's PID on each invocation; BASH_DELAY sleeps that long first.
handler() {
	EVENT_DATA=$1
	echo "handling $(echo "$EVENT_DATA" | grep -o '"eventID"' | wc -l) records in $$" 1>&2
	if [ -n "${BASH_PIDS:-}" ]; then echo "$$" >>"$BASH_PIDS"; fi
	if [ -n "${BASH_DELAY:-}" ]; then sleep "$BASH_DELAY"; fi
	fail="${BASH_FAIL:-}"
	if [ -n "${BASH_FAIL_ONCE:-}" ]; then
		if [ -f "$BASH_FAIL_ONCE" ]; then rm -f "$BASH_FAIL_ONCE"; else fail=""; fi
	fi
	case "$fail" in
	error) echo "bad batch"; return 1 ;;
	exit) kill -KILL $$ ;;
	sleep) sleep 60 ;;
	esac
	echo '{"batchItemFailures":[]}'
}
