package esmapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Results keeps each mapping's LastProcessingResult, so that a restart shows what the mapping's
// last batch did rather than "No records processed". Optional (WithResults).
type Results interface {
	// LoadResult returns the mapping's kept result, "" when none was kept.
	LoadResult(ctx context.Context, uuid string) (string, error)
	// SaveResult keeps result as the mapping's.
	SaveResult(ctx context.Context, uuid, result string) error
	// DeleteResult forgets a deleted mapping's result.
	DeleteResult(ctx context.Context, uuid string) error
}

// FileResults keeps each mapping's result in Dir/<UUID>, a one-line file replaced atomically.
type FileResults struct{ Dir string }

var _ Results = FileResults{}

func (f FileResults) path(uuid string) string { return filepath.Join(f.Dir, uuid) }

// LoadResult implements Results.
func (f FileResults) LoadResult(_ context.Context, uuid string) (string, error) {
	b, err := os.ReadFile(f.path(uuid))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the result of mapping %s: %w", uuid, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SaveResult implements Results.
func (f FileResults) SaveResult(_ context.Context, uuid, result string) error {
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	tmp, err := os.CreateTemp(f.Dir, "."+uuid+"-*")
	if err != nil {
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	_, werr := tmp.WriteString(result + "\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	if err := os.Rename(tmp.Name(), f.path(uuid)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	return nil
}

// DeleteResult implements Results.
func (f FileResults) DeleteResult(_ context.Context, uuid string) error {
	if err := os.Remove(f.path(uuid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete the result of mapping %s: %w", uuid, err)
	}
	return nil
}
