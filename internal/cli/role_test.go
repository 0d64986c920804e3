package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
)

type fakeConfigurations struct {
	role string
	err  error
	got  string
}

func (f *fakeConfigurations) GetFunctionConfiguration(_ context.Context, in *awslambda.GetFunctionConfigurationInput, _ ...func(*awslambda.Options)) (*awslambda.GetFunctionConfigurationOutput, error) {
	f.got = aws.ToString(in.FunctionName)
	if f.err != nil {
		return nil, f.err
	}
	return &awslambda.GetFunctionConfigurationOutput{Role: aws.String(f.role)}, nil
}

// TestFunctionRole: a lambda: target's events carry the function's own execution role as their
// invokeIdentityArn; when Lambda cannot say, the default stays ("").
func TestFunctionRole(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &fakeConfigurations{role: "arn:aws:iam::123456789012:role/orders-role"}
	if got := functionRole(context.Background(), f, "orders", log); got != f.role || f.got != "orders" {
		t.Fatalf("role %q (asked for %q), want %q", got, f.got, f.role)
	}
	if got := functionRole(context.Background(), &fakeConfigurations{err: errors.New("AccessDenied")}, "orders", log); got != "" {
		t.Fatalf("role %q when Lambda refuses, want the default", got)
	}
}

// TestServeBaseHasDestinationPolicy: esm serve's --on-destination-failure reaches every mapping's
// poller configuration, with the polling flags.
func TestServeBaseHasDestinationPolicy(t *testing.T) {
	f := ServeFlags{DestinationFlags: DestinationFlags{OnDestinationFailure: "drop"}, PollFlags: PollFlags{PollInterval: 3 * time.Second}}
	if c := f.base(); c.OnDestinationFailure != "drop" || c.PollInterval != 3*time.Second {
		t.Fatalf("base %+v, want OnDestinationFailure drop and PollInterval 3s", c)
	}
}
