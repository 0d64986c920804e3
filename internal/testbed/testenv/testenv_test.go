package testenv

import "testing"

func TestTestEndpointsFromEnvironment(t *testing.T) {
	t.Setenv(EnvKinesisEndpoint, "http://127.0.0.1:1")
	t.Setenv(EnvDynamoDBEndpoint, "http://127.0.0.1:2")
	ctx := t.Context()
	k, stopK, err := KinesisEndpoint(ctx)
	if err != nil || k != "http://127.0.0.1:1" {
		t.Errorf("KinesisEndpoint = %q, %v; want the environment's value", k, err)
	}
	d, stopD, err := DynamoEndpoint(ctx)
	if err != nil || d != "http://127.0.0.1:2" {
		t.Errorf("DynamoEndpoint = %q, %v; want the environment's value", d, err)
	}
	stopK()
	stopD()
}
