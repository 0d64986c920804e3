package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// EnvUpdateGolden names the environment variable that makes Golden rewrite its files:
// ESM_UPDATE_GOLDEN=1 go test ./pkg/.
const EnvUpdateGolden = "ESM_UPDATE_GOLDEN"

// Golden fails t unless got equals the file testdata/name; with $ESM_UPDATE_GOLDEN set it first
// writes got there.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv(EnvUpdateGolden) != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (%s=1 rewrites it)\n got:\n%s\nwant:\n%s", path, EnvUpdateGolden, got, want)
	}
}
