package image

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fakeBinaries writes a stand-in binary per architecture.
func fakeBinaries(t *testing.T, content string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	m := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte(content+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		m[arch] = p
	}
	return m
}

func digest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var commitTime = time.Unix(1_700_000_000, 0)

func build(t *testing.T, o Options) v1.ImageIndex {
	t.Helper()
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestReproducible: the same inputs give the same digest, through an OCI layout written and read
// back too; another binary, commit time or version gives another.
func TestReproducible(t *testing.T) {
	o := Options{Binaries: fakeBinaries(t, "esm"), Version: "v1.0.0", Revision: "abc", Source: "https://example.com/esm", Created: commitTime}
	a, b := digest(t, build(t, o)), digest(t, build(t, o))
	if a != b {
		t.Fatalf("two builds: %s and %s", a, b)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	for range 2 { // the second write replaces the first
		if err := WriteLayout(dir, "v1.0.0", build(t, o)); err != nil {
			t.Fatal(err)
		}
	}
	read, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := digest(t, read); d != a {
		t.Errorf("the layout holds %s, built %s", d, a)
	}
	for name, change := range map[string]func(*Options){
		"binary":  func(o *Options) { o.Binaries = fakeBinaries(t, "other") },
		"created": func(o *Options) { o.Created = o.Created.Add(time.Second) },
		"version": func(o *Options) { o.Version = "v1.0.1" },
	} {
		o2 := o
		change(&o2)
		if digest(t, build(t, o2)) == a {
			t.Errorf("another %s, the same digest", name)
		}
	}
}

// TestImageRuns: the image runs /esm run as 65532:65532, labelled, with a file system holding the
// user, the CA roots and a home the user owns.
func TestImageRuns(t *testing.T) {
	idx := build(t, Options{Binaries: fakeBinaries(t, "esm"), Version: "v1.0.0", Revision: "abc", Source: "https://example.com/esm", Created: commitTime})
	img, err := Platform(idx, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/esm" || strings.Join(c.Cmd, " ") != "run" || c.WorkingDir != Home {
		t.Errorf("config: user %q entrypoint %q cmd %q workdir %q", c.User, c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	if cf.Architecture != "arm64" || !cf.Created.Equal(commitTime) {
		t.Errorf("architecture %s created %v", cf.Architecture, cf.Created)
	}
	for k, v := range map[string]string{"org.opencontainers.image.version": "v1.0.0", "org.opencontainers.image.revision": "abc",
		"org.opencontainers.image.source": "https://example.com/esm"} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	root := t.TempDir()
	if err := Unpack(img, root); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "esm")); err != nil || string(b) != "esmarm64" {
		t.Errorf("/esm: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.Contains(string(b), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd:\n%s", b)
	}
	pem, err := os.ReadFile(filepath.Join(root, CABundlePath))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) || strings.Count(string(pem), "BEGIN CERTIFICATE") < 100 {
		t.Errorf("the CA bundle holds %d certificates", strings.Count(string(pem), "BEGIN CERTIFICATE"))
	}
	fi, err := os.Stat(filepath.Join(root, Home))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && (st.Uid != UID || fi.Mode().Perm() != 0o700) {
		t.Errorf("%s: owner %d mode %v", Home, st.Uid, fi.Mode())
	}
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("/tmp: %v %v", fi.Mode(), err)
	}
}

// TestAddBootstrap: an image built from esm's holds the bootstrap at /var/task/bootstrap above
// esm's layers, for the platforms given.
func TestAddBootstrap(t *testing.T) {
	esm := build(t, Options{Binaries: fakeBinaries(t, "esm"), Version: "v1.0.0", Created: commitTime})
	team, err := AddBootstrap(esm, map[string]string{"amd64": fakeBinaries(t, "bootstrap")["amd64"]}, commitTime)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Platform(team, "arm64"); err == nil {
		t.Error("a platform without a bootstrap was kept")
	}
	img, err := Platform(team, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Unpack(img, root); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, BootstrapPath))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bootstrap: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "esm")); err != nil {
		t.Error(err)
	}
	if _, err := AddBootstrap(esm, map[string]string{"s390x": fi.Name()}, commitTime); err == nil {
		t.Error("a bootstrap for a platform esm's image lacks")
	}
}
