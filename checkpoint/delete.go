package checkpoint

import (
	"errors"

	bolterrors "go.etcd.io/bbolt/errors"

	bolt "go.etcd.io/bbolt"
)

// DeleteMapping removes a mapping's progress from the store; a mapping without any is no error.
func (s *FileStore) DeleteMapping(key string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte(key)); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		return nil
	})
}
