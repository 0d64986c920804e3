// Package image builds esm's OCI image without a container daemon or a registry, with
// go-containerregistry: for each platform, a layer with the non-root user, the CA roots and the
// writable directories, and a layer with the static esm binary, under one image index. Every
// byte is fixed by its inputs (the binaries, the version, the commit and its time): the tar
// entries are sorted and dated at the commit, owned by numeric ids, and the configuration's
// dates are the commit's too, so the same commit gives the same digest on any machine.
//
// The same package puts a team's Lambda bootstrap into an image built from esm's
// ([AddBootstrap]), for "esm run --invoke exec:/var/task/bootstrap".
package image

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: a numeric id, so that Kubernetes' runAsNonRoot can check it without reading
// /etc/passwd; the same as distroless' nonroot.
const (
	UID      = 65532
	GID      = 65532
	userName = "nonroot"
	Home     = "/home/nonroot"
)

// BootstrapPath is where [AddBootstrap] puts a Lambda bootstrap: Lambda's task root.
const BootstrapPath = "/var/task/bootstrap"

// CABundlePath is where the CA roots are, the path Go's crypto/x509 reads first on Linux.
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// MetricsPort is the port the image documents (EXPOSE) for --metrics-addr 0.0.0.0:9090.
const MetricsPort = 9090

// Options say what goes into esm's image.
type Options struct {
	// Binaries maps a Go architecture ("amd64", "arm64") to the path of a static linux esm
	// binary for it; one image per entry.
	Binaries map[string]string
	// Version and Revision (the commit) are stamped into the labels; Source is the repository.
	Version, Revision, Source string
	// Created is the date of every file and of the configuration: the commit's time.
	Created time.Time
}

// Build returns esm's image index: one image per architecture of o.Binaries.
func Build(o Options) (v1.ImageIndex, error) {
	if len(o.Binaries) == 0 {
		return nil, fmt.Errorf("image: no esm binary")
	}
	created := o.Created.UTC().Truncate(time.Second)
	base, err := baseLayer(created)
	if err != nil {
		return nil, err
	}
	labels := o.labels(created)
	var adds []mutate.IndexAddendum
	for _, arch := range slices.Sorted(maps.Keys(o.Binaries)) {
		bin, err := fileLayer(o.Binaries[arch], "esm", created)
		if err != nil {
			return nil, err
		}
		img, err := assemble(arch, created, labels, []layerAdd{
			{base, "the nonroot user (" + fmt.Sprint(UID) + "), CA roots, " + Home + " and /tmp"},
			{bin, "esm " + o.Version},
		})
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

// labels are the OCI annotations of the image and its index.
func (o Options) labels(created time.Time) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "esm",
		"org.opencontainers.image.description": "AWS Lambda's Kinesis event source mapping, outside AWS",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.source":      o.Source,
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}

type layerAdd struct {
	layer   v1.Layer
	comment string
}

// assemble makes one platform's image from its layers, dated created, run as the nonroot user.
func assemble(arch string, created time.Time, labels map[string]string, layers []layerAdd) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: l.layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "esm image build", Comment: l.comment}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, GID),
		WorkingDir:   Home,
		Entrypoint:   []string{"/esm"},
		Cmd:          []string{"run"},
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CABundlePath},
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", MetricsPort): {}},
		Labels:       labels,
	}
	return mutate.ConfigFile(img, cf)
}

// layerFrom makes a layer of a tar written in memory.
func layerFrom(tarBytes []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
