package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/deploy/image"
)

// TestRun: what make image and make function-image run: esm's image from binaries, then a
// team's from it with a bootstrap; each prints the digest of the index the layout holds, the
// same for the same inputs; bad invocations are refused.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	esmArgs := []string{"-esm", "amd64=" + file("esm-amd64"), "-esm", "arm64=" + file("esm-arm64"), "-version", "v1.0.0",
		"-revision", "abc", "-created", "1700000000", "-layout", filepath.Join(dir, "oci"), "-tarballs", dir}
	var first, second bytes.Buffer
	if err := run(esmArgs, &first); err != nil {
		t.Fatal(err)
	}
	if err := run(esmArgs, &second); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() || !strings.HasPrefix(first.String(), "index sha256:") {
		t.Fatalf("two runs printed\n%s\nand\n%s", &first, &second)
	}
	idx, err := image.ReadLayout(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	if !strings.Contains(first.String(), d.String()) {
		t.Errorf("printed\n%s\nthe layout holds %s", &first, d)
	}
	for _, p := range []string{"esm-linux-amd64.tar", "esm-linux-arm64.tar"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Error(err)
		}
	}

	var team bytes.Buffer
	teamArgs := []string{"-from", filepath.Join(dir, "oci"), "-bootstrap", "amd64=" + file("bootstrap"), "-version", "orders-7",
		"-layout", filepath.Join(dir, "team"), "-repo", "registry.example.com/orders-esm", "-tarballs", dir}
	if err := run(teamArgs, &team); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(team.String(), "arm64") || !strings.Contains(team.String(), "amd64") {
		t.Errorf("the team's image, with an amd64 bootstrap only:\n%s", &team)
	}
	if _, err := os.Stat(filepath.Join(dir, "orders-esm-linux-amd64.tar")); err != nil {
		t.Error(err)
	}

	for name, args := range map[string][]string{
		"nothing to build":    {"-layout", dir},
		"both -esm and -from": {"-esm", "amd64=x", "-from", dir, "-layout", dir},
		"-from alone":         {"-from", dir, "-layout", dir},
		"no output":           {"-esm", "amd64=x"},
		"not ARCH=PATH":       {"-esm", "amd64", "-layout", dir},
		"a non-layout dir":    append(esmArgs[:len(esmArgs)-4:len(esmArgs)-4], "-layout", dir),
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
