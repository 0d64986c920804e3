package getrecords

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Kinesis is a Kinesis client whose GetRecords takes the lean path; every other call is the SDK
// client's.
type Kinesis struct {
	*kinesis.Client
	lean *Client
}

// Wrap returns kin with GetRecords on the lean path (see New).
func Wrap(kin *kinesis.Client) *Kinesis { return &Kinesis{Client: kin, lean: New(kin)} }

// GetRecords is the lean path's (Client.GetRecords).
func (k *Kinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return k.lean.GetRecords(ctx, in, optFns...)
}

// StartGetRecords is the lean path's (Client.StartGetRecords).
func (k *Kinesis) StartGetRecords(ctx context.Context, in *kinesis.GetRecordsInput, done func(out *kinesis.GetRecordsOutput, finish func() (*kinesis.GetRecordsOutput, error))) bool {
	return k.lean.StartGetRecords(ctx, in, done)
}

// Batch is the lean path's (Client.Batch).
func (k *Kinesis) Batch() (send func()) { return k.lean.Batch() }
