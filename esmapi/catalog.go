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
	"sync"
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
	// Revision counts the changes of the record: 0 when created, one more with each change.
	// Every write is conditional on the revision it was made from, so one revision of a mapping
	// has one content, and workers sharing a catalog apply a record whose revision is higher
	// than theirs.
	Revision int64 `json:"Revision"`
	// Created orders ListEventSourceMappings.
	Created time.Time         `json:"Created"`
	Tags    map[string]string `json:"Tags,omitempty"`
}

// ErrConflict is what a Catalog's Put and Delete return when the mapping's record is no longer
// the revision the write was made from: another worker changed or deleted it first.
var ErrConflict = errors.New("the mapping was changed by another worker")

// Catalog keeps the mappings' definitions. Its writes are conditional, so that workers sharing
// it never overwrite each other's changes, and no two of its records have the same
// EventSourceArn and FunctionArn, whichever workers write them.
type Catalog interface {
	Load(ctx context.Context) ([]Record, error)
	// Put writes r if the catalog holds the revision r was made from: no record of the mapping
	// when r.Revision is 0, else its revision r.Revision-1. Otherwise it returns ErrConflict.
	// It returns a *PairTakenError, and writes nothing, when another mapping's record (being
	// deleted or not) has r's EventSourceArn and FunctionArn.
	Put(ctx context.Context, r Record) error
	// Delete removes the mapping's record if it is at revision rev, or already gone; otherwise
	// it returns ErrConflict.
	Delete(ctx context.Context, uuid string, rev int64) error
}

// conflictErr reports a failed condition: the revision the catalog holds (-1: none) against the
// one a write was made from.
func conflictErr(uuid string, have, want int64) error {
	switch {
	case have < 0:
		return fmt.Errorf("mapping %s: no record, want revision %d: %w", uuid, want, ErrConflict)
	case want < 0:
		return fmt.Errorf("mapping %s: revision %d, want no record: %w", uuid, have, ErrConflict)
	}
	return fmt.Errorf("mapping %s: revision %d, want %d: %w", uuid, have, want, ErrConflict)
}

// FileCatalog keeps each mapping as <dir>/<UUID>.json, written atomically. The directory is
// meant to sit in the state directory, whose lock keeps other processes out.
type FileCatalog struct{ Dir string }

// fileWrites serializes the writes to one directory within this process (the state directory's
// lock keeps other processes out), so that each write's checks and the write are one step.
var fileWrites sync.Map // cleaned directory → *sync.Mutex

func (c FileCatalog) lock() (unlock func()) {
	mu, _ := fileWrites.LoadOrStore(filepath.Clean(c.Dir), new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

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

// revision is the revision of the mapping's file, -1 when there is none.
func (c FileCatalog) revision(uuid string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, uuid+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read mapping: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("mapping %s: %w", uuid, err)
	}
	return r.Revision, nil
}

// Put implements Catalog: the file is written aside, synced and renamed into place. The
// directory is this process's (the state directory's lock) and its writes are serialized, so
// checking the revision and the other records' pairs first is enough for its conditions.
func (c FileCatalog) Put(ctx context.Context, r Record) error {
	defer c.lock()()
	recs, err := c.Load(ctx)
	if err != nil {
		return err
	}
	var prev *Record
	for i := range recs {
		if recs[i].Mapping.UUID == r.Mapping.UUID {
			prev = &recs[i]
		}
	}
	have := int64(-1)
	if prev != nil {
		have = prev.Revision
	}
	if have != r.Revision-1 {
		return conflictErr(r.Mapping.UUID, have, r.Revision-1)
	}
	if p := pairOf(&r); prev == nil || pairOf(prev) != p {
		for i := range recs {
			if recs[i].Mapping.UUID != r.Mapping.UUID && pairOf(&recs[i]) == p {
				return p.taken(recs[i].Mapping.UUID)
			}
		}
	}
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
func (c FileCatalog) Delete(_ context.Context, uuid string, rev int64) error {
	defer c.lock()()
	if have, err := c.revision(uuid); err != nil {
		return err
	} else if have >= 0 && have != rev {
		return conflictErr(uuid, have, rev)
	}
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
