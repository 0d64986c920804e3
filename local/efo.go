package local

import (
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// NoInitialResponse is a SubscribeToShard client option for kinesis-local, which starts its event
// stream without the initial-response message Kinesis sends (the SDK then fails with "expected
// initial-response"). For tests against the emulator only: on AWS it would read the
// initial-response as an event. Give it per call, after esm's own options (service.Options.
// SubscribeOptions, poller.WithSubscribeOptions), so that it wraps each subscription's own
// protocol instance.
func NoInitialResponse(o *kinesis.Options) { o.Protocol = noInitialResponse{o.Protocol} }

type noInitialResponse struct{ smithyhttp.ClientProtocol }

func (noInitialResponse) HasInitialEventMessage() bool { return false }
