package checkpoint

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// A mapping's UUID is Lambda's EventSourceMappingUUID for esm: a random (version 4) UUID created
// the first time the mapping runs and kept with its progress, so it stays the same across
// restarts and workers. It names the mapping in metrics (EMF's EventSourceMappingUUID) and in the
// S3 on-failure destination's object keys.

// mappingUUIDKey is the key under which a FileStore keeps the UUID in the mapping's bucket, next
// to its shards' progress; no shard id looks like it.
const mappingUUIDKey = "esm:mapping-uuid"

// MappingUUID returns the mapping's UUID: the one stored with its progress, or a new random one,
// stored now.
func (m *Mapping) MappingUUID(context.Context) (string, error) {
	var id string
	err := m.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(m.bucket)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(mappingUUIDKey)); v != nil {
			id = string(v)
			return nil
		}
		id = uuid.NewString()
		return b.Put([]byte(mappingUUIDKey), []byte(id))
	})
	if err != nil {
		return "", fmt.Errorf("mapping UUID: %w", err)
	}
	return id, nil
}
