// Command esm-image builds esm's OCI image without a container daemon or a registry ("make
// image" runs it), or an image built from esm's with a team's Lambda bootstrap added, and writes
// it as an OCI image layout (crane push, skopeo copy oci:) and one tarball per platform (docker
// load, podman load). It prints the index's digest, which the same inputs always reproduce.
//
//	esm-image -esm amd64=bin/linux-amd64/esm -esm arm64=bin/linux-arm64/esm \
//	  -version v1.2.3 -revision $(git rev-parse HEAD) -created $(git log -1 --format=%ct) \
//	  -layout bin/image/oci -tarballs bin/image
//	esm-image -from bin/image/oci -bootstrap amd64=bootstrap-amd64 -bootstrap arm64=bootstrap-arm64 \
//	  -version orders-7 -layout bin/orders/oci -tarballs bin/orders -repo registry.example.com/orders-esm
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kinesis-esm/esm/deploy/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "esm-image:", err)
		os.Exit(1)
	}
}

type config struct {
	esm, bootstrap                 map[string]string
	from, version, revision, repo  string
	source, layoutDir, tarballsDir string
	created                        int64
}

func parse(args []string) (config, error) {
	c := config{esm: map[string]string{}, bootstrap: map[string]string{}}
	fs := flag.NewFlagSet("esm-image", flag.ContinueOnError)
	fs.Func("esm", "ARCH=PATH: a static linux esm binary for Go architecture ARCH (repeat per platform)", archPath(c.esm))
	fs.Func("bootstrap", "ARCH=PATH: a Lambda bootstrap to add as "+image.BootstrapPath+" (repeat per platform)", archPath(c.bootstrap))
	fs.StringVar(&c.from, "from", "", "an OCI layout of esm's image to add the bootstraps to, instead of -esm")
	fs.StringVar(&c.version, "version", "dev", "the version: the label org.opencontainers.image.version and the tag")
	fs.StringVar(&c.revision, "revision", "", "the commit: the label org.opencontainers.image.revision")
	fs.StringVar(&c.source, "source", "https://github.com/kinesis-esm/esm", "the label org.opencontainers.image.source")
	fs.StringVar(&c.repo, "repo", "esm", "the repository the tarballs are tagged in (REPO:VERSION)")
	fs.Int64Var(&c.created, "created", envEpoch(), "the files' and configuration's date, Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	fs.StringVar(&c.layoutDir, "layout", "", "write the OCI image layout here (replacing the one there)")
	fs.StringVar(&c.tarballsDir, "tarballs", "", "write one docker-loadable tarball per platform here")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case (len(c.esm) == 0) == (c.from == ""):
		return c, fmt.Errorf("give either -esm or -from")
	case c.from != "" && len(c.bootstrap) == 0:
		return c, fmt.Errorf("-from needs -bootstrap")
	case c.layoutDir == "" && c.tarballsDir == "":
		return c, fmt.Errorf("give -layout, -tarballs or both")
	}
	return c, nil
}

// archPath parses ARCH=PATH into m.
func archPath(m map[string]string) func(string) error {
	return func(s string) error {
		arch, p, ok := strings.Cut(s, "=")
		if !ok || arch == "" || p == "" {
			return fmt.Errorf("want ARCH=PATH, have %q", s)
		}
		m[arch] = p
		return nil
	}
}

func envEpoch() int64 {
	n, _ := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	return n
}

func run(args []string, stdout io.Writer) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	created := time.Unix(c.created, 0)
	var idx v1.ImageIndex
	if c.from != "" {
		base, err := image.ReadLayout(c.from)
		if err != nil {
			return err
		}
		idx, err = image.AddBootstrap(base, c.bootstrap, created)
		if err != nil {
			return err
		}
	} else {
		idx, err = image.Build(image.Options{Binaries: c.esm, Version: c.version, Revision: c.revision, Source: c.source, Created: created})
		if err != nil {
			return err
		}
	}
	if c.layoutDir != "" {
		if err := image.WriteLayout(c.layoutDir, c.version, idx); err != nil {
			return err
		}
	}
	if c.tarballsDir != "" {
		if err := os.MkdirAll(c.tarballsDir, 0o755); err != nil {
			return err
		}
		if _, err := image.WriteTarballs(c.tarballsDir, filepath.Base(c.repo), c.repo+":"+c.version, idx); err != nil {
			return err
		}
	}
	return report(stdout, idx)
}

// report prints the index's digest and each platform's image digest and size (the compressed
// layers, configuration and manifest: what a registry stores and a node pulls).
func report(w io.Writer, idx v1.ImageIndex) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "index %s\n", d)
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, m := range im.Manifests {
		size, err := image.Size(idx, m.Digest)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  linux/%-6s %s  %.1f MiB\n", m.Platform.Architecture, m.Digest, float64(size)/(1<<20))
	}
	return nil
}
