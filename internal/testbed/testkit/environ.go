package testkit

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// Environ decodes the answer of a test function that reports the environment it was started
// with, {"environ": base64 of /proc/<pid>/environ}, into its variables.
func Environ(t testing.TB, payload []byte) map[string]string {
	t.Helper()
	var doc struct{ Environ string }
	if err := json.Unmarshal(payload, &doc); err != nil {
		t.Fatalf("response %q: %v", payload, err)
	}
	raw, err := base64.StdEncoding.DecodeString(doc.Environ)
	if err != nil || len(raw) == 0 {
		t.Fatalf("environ %q: %v", doc.Environ, err)
	}
	vars := map[string]string{}
	for _, kv := range strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return vars
}
