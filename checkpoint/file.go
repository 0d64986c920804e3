// Package checkpoint keeps each mapping's progress in its shards in one bbolt file of a state
// directory, held by one process at a time: esm's default poller.Store.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/kinesis-esm/esm/poller"
)

// ErrLocked is returned by OpenFile when another process holds the state directory.
var ErrLocked = errors.New("state directory in use by another process")

const (
	dbName  = "state.db"
	pidName = "esm.pid"
)

// FileStore holds the progress of any number of mappings in <dir>/state.db. The file is locked
// for as long as it is open, so two processes can never share it.
type FileStore struct {
	db  *bolt.DB
	dir string
}

// OpenFile opens (creating if needed) the store in dir. If another process holds it, it fails
// at once with an error wrapping ErrLocked that names the directory and, when known, the holder's
// PID; nothing is written in that case.
func OpenFile(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	db, err := openBolt(dir, false)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, pidName), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("write pid file: %w", err)
	}
	return &FileStore{db: db, dir: dir}, nil
}

// openBolt opens <dir>/state.db, read-only or not, failing at once with an error wrapping
// ErrLocked (naming the holder's PID when known) if another process holds it.
func openBolt(dir string, readOnly bool) (*bolt.DB, error) {
	path := filepath.Join(dir, dbName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 200 * time.Millisecond, ReadOnly: readOnly})
	if err == nil {
		return db, nil
	}
	if !errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	holder := ""
	if b, rerr := os.ReadFile(filepath.Join(dir, pidName)); rerr == nil {
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
			holder = fmt.Sprintf(" (held by pid %d)", pid)
		}
	}
	return nil, fmt.Errorf("%w: %s%s", ErrLocked, dir, holder)
}

// ReadFile reads one mapping's progress from the store in dir without writing anything: the file
// is opened read-only, and a directory without a store holds no progress. While an esm process
// holds the store it fails at once with an error wrapping ErrLocked.
func ReadFile(dir, key string) (map[string]poller.ShardProgress, error) {
	if _, err := os.Stat(filepath.Join(dir, dbName)); errors.Is(err, fs.ErrNotExist) {
		return map[string]poller.ShardProgress{}, nil
	}
	db, err := openBolt(dir, true)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return (&Mapping{db: db, bucket: []byte(key)}).Load(context.Background())
}

// Close releases the file and its lock.
func (s *FileStore) Close() error {
	_ = os.Remove(filepath.Join(s.dir, pidName))
	return s.db.Close()
}

// Dir is the state directory.
func (s *FileStore) Dir() string { return s.dir }

// MappingKey names a mapping inside the store: one stream read by one function.
func MappingKey(streamARN, function string) string { return streamARN + "|" + function }

// Mapping returns the poller.Store of one mapping.
func (s *FileStore) Mapping(key string) *Mapping { return &Mapping{db: s.db, bucket: []byte(key)} }

// Mappings lists the mapping keys the store holds.
func (s *FileStore) Mappings() ([]string, error) {
	var keys []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			keys = append(keys, string(name))
			return nil
		})
	})
	return keys, err
}

// Mapping is the progress of one mapping in a FileStore.
type Mapping struct {
	db     *bolt.DB
	bucket []byte
}

var _ poller.Store = (*Mapping)(nil)

// Load implements poller.Store.
func (m *Mapping) Load(context.Context) (map[string]poller.ShardProgress, error) {
	out := map[string]poller.ShardProgress{}
	err := m.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(m.bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if string(k) == mappingUUIDKey { // the mapping's UUID, not a shard
				return nil
			}
			var pr poller.ShardProgress
			if err := json.Unmarshal(v, &pr); err != nil {
				return fmt.Errorf("shard %s: %w", k, err)
			}
			out[string(k)] = pr
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read progress: %w", err)
	}
	return out, nil
}

// Save implements poller.Store: one transaction, synced to disk before it returns.
func (m *Mapping) Save(_ context.Context, updates map[string]poller.ShardProgress) error {
	return m.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(m.bucket)
		if err != nil {
			return err
		}
		for id, pr := range updates {
			v, err := json.Marshal(pr)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(id), v); err != nil {
				return err
			}
		}
		return nil
	})
}
