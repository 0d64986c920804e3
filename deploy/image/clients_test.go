package image

import (
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestClientsTakeIt: what docker load and podman load read (each platform's tarball, a
// docker-archive) holds the platform's image (its configuration, so the same image ID); and the layout's index
// pushes to a registry (what crane push does, through the same library) and comes back the same.
func TestClientsTakeIt(t *testing.T) {
	idx := build(t, Options{Binaries: fakeBinaries(t, "esm"), Version: "v1.0.0", Created: commitTime})
	dir := t.TempDir()
	paths, err := WriteTarballs(dir, "esm", "registry.example.com/esm:v1.0.0", idx)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 {
		t.Fatalf("tarballs %v, want one per platform", paths)
	}
	tag, err := name.NewTag("registry.example.com/esm:v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		arch := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "esm-linux-"), ".tar")
		loaded, err := tarball.ImageFromPath(p, &tag)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want, err := Platform(idx, arch)
		if err != nil {
			t.Fatal(err)
		}
		// docker load keeps the configuration (its digest is the image ID) and the layers, and
		// writes a manifest of its own.
		ld, _ := loaded.ConfigName()
		wd, _ := want.ConfigName()
		if ld != wd {
			t.Errorf("%s holds the image %s, the index's linux/%s is %s", p, ld, arch, wd)
		}
	}

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	ref, err := name.NewTag(strings.TrimPrefix(reg.URL, "http://") + "/esm:v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(filepath.Join(dir, "oci"), "v1.0.0", idx); err != nil {
		t.Fatal(err)
	}
	fromLayout, err := ReadLayout(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, fromLayout); err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := digest(t, pulled), digest(t, idx); got != want {
		t.Errorf("pushed %s, pulled %s", want, got)
	}
}
