package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDemo runs the demo, smaller, as make demo and make demo-efo run it: it must pass every
// check.
func TestDemo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "esm")
	if out, err := exec.Command("go", "build", "-o", bin, "../esm").CombinedOutput(); err != nil {
		t.Fatalf("build esm: %v\n%s", err, out)
	}
	for _, efo := range []bool{false, true} {
		if err := run(context.Background(), bin, 400, 20, efo); err != nil {
			t.Fatalf("efo=%t: %v", efo, err)
		}
	}
}

// TestDemoDDB runs the DynamoDB Streams story, smaller, as make demo-ddb runs it: it must pass
// every check.
func TestDemoDDB(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "esm")
	if out, err := exec.Command("go", "build", "-o", bin, "../esm").CombinedOutput(); err != nil {
		t.Fatalf("build esm: %v\n%s", err, out)
	}
	if err := runDDB(context.Background(), bin, 800, 20); err != nil {
		t.Fatal(err)
	}
}
