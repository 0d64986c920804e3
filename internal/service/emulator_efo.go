//go:build esm_kinesislocal

package service

import "github.com/kinesis-esm/esm/local"

// Built with -tags esm_kinesislocal (the end-to-end tests' esm binary only): SubscribeToShard
// expects no initial-response message, as kinesis-local sends none. Never use this build against
// AWS, which does send it.
func init() { buildSubscribeOptions = append(buildSubscribeOptions, local.NoInitialResponse) }
