package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNotInstalled is returned (wrapped) by [StartKinesis] and [StartDynalite]
// when the emulator's npm package cannot be found in a node_modules directory
// of the repository.
var ErrNotInstalled = errors.New("emulator not installed: run npm ci in the repository root")

// preloadPath is the Node preload, relative to the repository root, that makes
// every TCP listen bind 127.0.0.1.
const preloadPath = ".ci/force-loopback.js"

// installation is where an emulator was found.
type installation struct {
	root    string // repository root: the directory holding node_modules
	script  string // the emulator's entry point
	preload string // the loopback preload
}

// findInstallation looks for node_modules/<rel> in start and then in each of
// its parents. An empty start means the working directory. The repository
// that holds it must also hold the loopback preload.
func findInstallation(start, name, rel string) (installation, error) {
	if start == "" {
		wd, err := os.Getwd()
		if err != nil {
			return installation{}, fmt.Errorf("find %s: %w", name, err)
		}
		start = wd
	}
	dir, err := filepath.Abs(start)
	if err != nil {
		return installation{}, fmt.Errorf("find %s: %w", name, err)
	}
	for {
		script := filepath.Join(dir, "node_modules", rel)
		if isFile(script) {
			preload := filepath.Join(dir, filepath.FromSlash(preloadPath))
			if !isFile(preload) {
				return installation{}, fmt.Errorf("%s found in %s but the loopback preload %s is missing", name, dir, preloadPath)
			}
			return installation{root: dir, script: script, preload: preload}, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return installation{}, fmt.Errorf("%s: no node_modules/%s in %s or any parent: %w", name, filepath.ToSlash(rel), start, ErrNotInstalled)
		}
		dir = parent
	}
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
