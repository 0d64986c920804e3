package service

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/poller"
)

// ResolveMapping finds o's stream (it must exist) and returns a Kinesis client for o's endpoint
// and the mapping's configuration with its StreamARN, and its FunctionARN derived from the
// function name when the mapping names none: what keys the mapping's progress and its on-failure
// messages. It writes nothing.
func ResolveMapping(ctx context.Context, cfg aws.Config, o Options) (*kinesis.Client, poller.Config, error) {
	kin := kinesis.NewFromConfig(cfg, func(ko *kinesis.Options) {
		if o.EndpointURL != "" {
			ko.BaseEndpoint = aws.String(o.EndpointURL)
		}
	})
	mc := o.Mapping
	arn, err := ResolveStreamARN(ctx, kin, o.Stream)
	if err != nil {
		return nil, mc, err
	}
	sa, err := poller.ParseStreamARN(arn)
	if err != nil {
		return nil, mc, err
	}
	mc.StreamARN = arn
	if mc.FunctionARN == "" {
		mc.FunctionARN = FunctionARN(sa, o.FunctionName)
	}
	return kin, mc, nil
}
