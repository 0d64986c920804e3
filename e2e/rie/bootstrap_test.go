package rie

import (
	"debug/buildinfo"
	"debug/elf"
	"path/filepath"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testenv"
)

// TestBootstrapBuildsForProvidedAL2023: the example function builds as a Lambda custom-runtime
// bootstrap for both architectures of provided.al2023, as "make bootstrap" builds it: a static
// Linux executable, without cgo, with the lambda.norpc tag.
func TestBootstrapBuildsForProvidedAL2023(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		goarch  string
		machine elf.Machine
	}{
		{"amd64", elf.EM_X86_64},
		{"arm64", elf.EM_AARCH64},
	} {
		t.Run(tt.goarch, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "bootstrap")
			if err := testenv.BuildBootstrap(testContext(t, 5*time.Minute), "", out, bootstrapPackage, tt.goarch); err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != tt.machine || f.Type != elf.ET_EXEC || f.Class != elf.ELFCLASS64 {
				t.Fatalf("ELF machine %v, type %v, class %v; want %v, ET_EXEC, ELFCLASS64", f.Machine, f.Type, f.Class, tt.machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Fatalf("the bootstrap is dynamically linked (%v): provided.al2023 needs a static binary", p.Type)
				}
			}
			info, err := buildinfo.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"GOOS": "linux", "GOARCH": tt.goarch, "CGO_ENABLED": "0", "-tags": "lambda.norpc", "-trimpath": "true"}
			for _, s := range info.Settings {
				if v, ok := want[s.Key]; ok && v == s.Value {
					delete(want, s.Key)
				}
			}
			if len(want) > 0 {
				t.Fatalf("build settings %v lack %v", info.Settings, want)
			}
			if info.Path != bootstrapPackage {
				t.Fatalf("main package %q, want %q", info.Path, bootstrapPackage)
			}
		})
	}
}
