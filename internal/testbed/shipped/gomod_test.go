package shipped

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFakeRequirementResolves: the root go.mod requires module fake at a version a user's go
// command can fetch. The replace that points the repository's own build at ./fake is not
// honoured for a module that depends on esm, so the required version has to exist: a
// pseudo-version naming a commit of this repository that holds fake/go.mod, with that commit's
// time (UTC) as the go command computes it. (v0.0.0-00010101000000-000000000000, what "go mod
// edit -replace" writes, names no commit: "go list -m all" and "go mod download" in a user's
// module fail on it.)
func TestFakeRequirementResolves(t *testing.T) {
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout: the commit cannot be looked up")
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/kinesis-esm/esm/fake (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod does not require github.com/kinesis-esm/esm/fake")
	}
	v := string(m[1])
	pv := regexp.MustCompile(`^v0\.0\.0-(\d{14})-([0-9a-f]{12})$`).FindStringSubmatch(v)
	if pv == nil {
		t.Fatalf("fake is required at %s: want a pseudo-version of a commit (no fake/ tag exists)", v)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fake %s: git %s: %v: %s", v, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("cat-file", "-e", pv[2]+":fake/go.mod")
	if when := git("log", "-1", "--format=%cd", "--date=format-local:%Y%m%d%H%M%S", pv[2]); when != pv[1] {
		t.Fatalf("fake %s: commit %s was made at %s UTC, not %s", v, pv[2], when, pv[1])
	}
}
