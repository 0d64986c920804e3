package esmapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Record is a mapping as esm keeps it between restarts.
type Record struct {
	// Mapping holds the mapping's settings; its State and LastProcessingResult are not kept.
	Mapping EventSourceMapping `json:"Mapping"`
	// FunctionName is the name the mapping was created or last updated with, as given.
	FunctionName string `json:"FunctionName"`
	// Enabled is what the user asked for: Lambda's Enabled.
	Enabled bool `json:"Enabled"`
	// Deleting is set by DeleteEventSourceMapping; a restart finishes the deletion.
	Deleting bool `json:"Deleting,omitempty"`
	// Revision counts the changes of the record; workers sharing a catalog apply a record whose
	// revision is higher than theirs.
	Revision int64 `json:"Revision"`
	// Created orders ListEventSourceMappings.
	Created time.Time         `json:"Created"`
	Tags    map[string]string `json:"Tags,omitempty"`
}

// Catalog keeps the mappings' definitions.
type Catalog interface {
	Load(ctx context.Context) ([]Record, error)
	Put(ctx context.Context, r Record) error
	Delete(ctx context.Context, uuid string) error
}

// FileCatalog keeps each mapping as <dir>/<UUID>.json, written atomically. The directory is
// meant to sit in the state directory, whose lock keeps other processes out.
type FileCatalog struct{ Dir string }

// Load implements Catalog.
func (c FileCatalog) Load(context.Context) ([]Record, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read mappings: %w", err)
	}
	var out []Record
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.Dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read mapping: %w", err)
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("mapping %s: %w", e.Name(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Put implements Catalog: the file is written aside, synced and renamed into place.
func (c FileCatalog) Put(_ context.Context, r Record) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("create mappings directory: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(c.Dir, r.Mapping.UUID+".json")
	f, err := os.CreateTemp(c.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("write mapping: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return fmt.Errorf("write mapping: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("write mapping: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write mapping: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write mapping: %w", err)
	}
	return syncDir(c.Dir)
}

// Delete implements Catalog.
func (c FileCatalog) Delete(_ context.Context, uuid string) error {
	if err := os.Remove(filepath.Join(c.Dir, uuid+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete mapping: %w", err)
	}
	return syncDir(c.Dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
