package service

import "github.com/aws/aws-sdk-go-v2/service/kinesis"

// buildSubscribeOptions are SubscribeToShard client options compiled in by build tags (see
// emulator_efo.go); empty in a normal build.
var buildSubscribeOptions []func(*kinesis.Options)
