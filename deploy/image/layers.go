package image

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// entry is one file or directory of a layer.
type entry struct {
	name     string // relative to the root, no leading slash
	mode     int64  // permission bits (and sticky)
	dir      bool
	uid, gid int
	data     []byte
}

// writeTar writes entries as a tar sorted by name, every header dated created, owned by numeric
// ids only (no user or group names, no access or change times): the same entries give the same
// bytes. Parent directories must be listed.
func writeTar(entries []entry, created time.Time) ([]byte, error) {
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatUSTAR}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: tar %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// baseLayer holds what esm needs besides itself: /etc/passwd and /etc/group naming the nonroot
// user (some libraries look the user up), the CA roots for the AWS endpoints, the nonroot
// user's home (the working directory: relative paths such as --state-dir .esm resolve there) and
// /tmp.
func baseLayer(created time.Time) (v1.Layer, error) {
	roots, err := caRoots()
	if err != nil {
		return nil, err
	}
	dir := func(name string, mode int64, owner int) entry {
		return entry{name: name, mode: mode, dir: true, uid: owner, gid: owner}
	}
	file := func(name, data string) entry { return entry{name: name, mode: 0o644, data: []byte(data)} }
	entries := []entry{
		dir("etc", 0o755, 0),
		file("etc/passwd", fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", userName, UID, GID, userName, Home)),
		file("etc/group", fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, GID)),
		dir("etc/ssl", 0o755, 0),
		dir("etc/ssl/certs", 0o755, 0),
		{name: strings.TrimPrefix(CABundlePath, "/"), mode: 0o644, data: roots},
		dir("home", 0o755, 0),
		dir(strings.TrimPrefix(Home, "/"), 0o700, UID),
		dir("tmp", 0o1777, 0),
	}
	b, err := writeTar(entries, created)
	if err != nil {
		return nil, err
	}
	return layerFrom(b)
}

// caRoots is the PEM bundle of the Mozilla (NSS) roots that Go's golang.org/x/crypto/x509roots
// ships, at the version go.mod pins: the same bytes on every machine, unlike a distribution's
// bundle. Roots that NSS distrusts for certificates issued after a date are left out, since a
// PEM file cannot carry that constraint.
func caRoots() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("image: no CA roots")
	}
	return buf.Bytes(), nil
}

// fileLayer is a layer holding the executable at src as /name (its parent directories, which
// another layer provides, are listed too), owned by root, mode 0755.
func fileLayer(src, name string, created time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	name = strings.TrimPrefix(name, "/")
	var entries []entry
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		entries = append(entries, entry{name: d, mode: 0o755, dir: true})
	}
	entries = append(entries, entry{name: name, mode: 0o755, data: data})
	b, err := writeTar(entries, created)
	if err != nil {
		return nil, err
	}
	return layerFrom(b)
}
