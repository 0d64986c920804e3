package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// AddBootstrap returns an index of esm's images (from) with a layer holding a Lambda bootstrap
// as /var/task/bootstrap on top, one per architecture of bootstraps (a Go architecture to the
// path of a static linux bootstrap, as built for provided.al2023); the platforms without one are
// left out. The layer is dated created.
func AddBootstrap(from v1.ImageIndex, bootstraps map[string]string, created time.Time) (v1.ImageIndex, error) {
	created = created.UTC().Truncate(time.Second)
	im, err := from.IndexManifest()
	if err != nil {
		return nil, err
	}
	var adds []mutate.IndexAddendum
	for _, arch := range slices.Sorted(maps.Keys(bootstraps)) {
		img, err := Platform(from, arch)
		if err != nil {
			return nil, err
		}
		l, err := fileLayer(bootstraps[arch], BootstrapPath, created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "esm image build", Comment: "the function's bootstrap"}})
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.Annotations(mutate.AppendManifests(idx, adds...), im.Annotations).(v1.ImageIndex), nil
}

// Platform returns the linux image for arch of idx.
func Platform(idx v1.ImageIndex, arch string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("image: no linux/%s image in the index", arch)
}

// refName is the annotation of index.json naming an index of an OCI layout (its tag).
const refName = "org.opencontainers.image.ref.name"

// WriteLayout writes idx as an OCI image layout in dir, named tag in index.json, replacing the
// layout already there. It refuses a directory that holds anything else.
func WriteLayout(dir, tag string, idx v1.ImageIndex) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("image: %s is not empty and holds no OCI layout", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: tag}))
}

// ReadLayout reads the one index of the OCI layout in dir (as WriteLayout wrote it).
func ReadLayout(dir string) (v1.ImageIndex, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	im, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 || !im.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("image: %s: want one image index in index.json, have %d entries", dir, len(im.Manifests))
	}
	return root.ImageIndex(im.Manifests[0].Digest)
}

// WriteTarballs writes each image of idx as a tarball that docker load and podman load take,
// tagged ref, into dir as <prefix>-linux-<arch>.tar, and returns their paths.
func WriteTarballs(dir, prefix, ref string, idx v1.ImageIndex) ([]string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, fmt.Sprintf("%s-linux-%s.tar", prefix, d.Platform.Architecture))
		if err := tarball.WriteToFile(p, tag, img); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Unpack writes img's file system (its layers flattened) under dir, with the modes and numeric
// owners of the image (owners only when run as root). It handles directories, regular files and
// symbolic links, and refuses paths that leave dir.
func Unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			continue // the root itself
		}
		if err := unpackOne(tr, h, target); err != nil {
			return fmt.Errorf("image: unpack %s: %w", h.Name, err)
		}
	}
}

func unpackOne(r io.Reader, h *tar.Header, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(h.Mode).Perm()
	if h.Mode&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, mode); err != nil {
			return err
		}
	case tar.TypeReg:
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		return os.Symlink(h.Linkname, target)
	default:
		return fmt.Errorf("unsupported type %c", h.Typeflag)
	}
	if err := os.Chmod(target, mode); err != nil { // MkdirAll and OpenFile apply the umask
		return err
	}
	if os.Geteuid() == 0 {
		return os.Lchown(target, h.Uid, h.Gid)
	}
	return nil
}

// Size is the bytes a node pulls for the image digest of idx: its manifest, its configuration and
// its compressed layers.
func Size(idx v1.ImageIndex, digest v1.Hash) (int64, error) {
	img, err := idx.Image(digest)
	if err != nil {
		return 0, err
	}
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
