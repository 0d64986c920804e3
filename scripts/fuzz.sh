#!/usr/bin/env bash
# Runs every fuzz target of the module (each "func FuzzX" of a _test.go file) for FUZZTIME each
# (default 30s), one after another, and prints a table: package, target, executions, seconds.
# A failing input is written by go test under the package's testdata/fuzz/<Target>/, where every
# later "go test" replays it as a regression case: commit it with the fix. Exits 1 if a target
# failed, after running the others.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

go=${GO:-go}
fuzztime=${FUZZTIME:-30s}
parallel=${FUZZPARALLEL:-2}

mapfile -t found < <(grep -rHo --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git \
	-E '^func Fuzz[A-Za-z0-9_]*\(' . | sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($|\1 \2|' | sort -u)
if [ ${#found[@]} -eq 0 ]; then
	echo "no fuzz targets found" >&2
	exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rows=()
failed=0
total_execs=0
start_all=$(date +%s)
for entry in "${found[@]}"; do
	read -r dir target <<<"$entry"
	echo "== ./$dir $target ($fuzztime)"
	start=$(date +%s.%N)
	status=ok
	ok=0
	for _ in 1 2; do
		# The fakes are a module of their own (fake/): run theirs from inside it.
		moddir=. pkg="./$dir"
		if [[ "$dir" == fake/* ]]; then
			moddir=fake pkg="./${dir#fake/}"
		fi
		if (cd "$moddir" && "$go" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel "$parallel" "$pkg") >"$log" 2>&1; then
			ok=1
			break
		fi
		# Go's fuzzer sometimes reports its own end of time as a failure ("context deadline
		# exceeded", no failing input written): run such a target once more. A real failure
		# writes its input under testdata/fuzz and fails at once.
		if grep -q 'Failing input written' "$log" || ! grep -q 'context deadline exceeded' "$log"; then
			break
		fi
		echo "   $target: the fuzzer ended on its own deadline, no failing input; once more"
	done
	if [ $ok -eq 0 ]; then
		status=FAIL
		failed=1
		cat "$log"
	fi
	end=$(date +%s.%N)
	execs=$(grep -Eo 'execs: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
	total_execs=$((total_execs + execs))
	rows+=("$(printf '%-22s %-28s %12s %8.1f  %s' "./$dir" "$target" "$execs" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$status")")
done
echo
printf '%-22s %-28s %12s %8s  %s\n' package target executions seconds result
printf '%s\n' "${rows[@]}"
echo "${#found[@]} targets, $total_execs executions, $(($(date +%s) - start_all)) s in all (FUZZTIME=$fuzztime each, -parallel $parallel)"
exit $failed
