package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
)

type fakeConfigurations struct {
	role    string
	timeout int32
	err     error
	got     string
}

func (f *fakeConfigurations) GetFunctionConfiguration(_ context.Context, in *awslambda.GetFunctionConfigurationInput, _ ...func(*awslambda.Options)) (*awslambda.GetFunctionConfigurationOutput, error) {
	f.got = aws.ToString(in.FunctionName)
	if f.err != nil {
		return nil, f.err
	}
	return &awslambda.GetFunctionConfigurationOutput{Role: aws.String(f.role), Timeout: aws.Int32(f.timeout)}, nil
}

// TestFunctionRole: a lambda: target's events carry the function's own execution role as their
// invokeIdentityArn; when Lambda cannot say, the default stays ("").
func TestFunctionRole(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &fakeConfigurations{role: "arn:aws:iam::123456789012:role/orders-role"}
	if cfg := functionConfiguration(context.Background(), f, "orders", log); aws.ToString(cfg.Role) != f.role || f.got != "orders" {
		t.Fatalf("configuration %+v (asked for %q), want role %q", cfg, f.got, f.role)
	}
	if cfg := functionConfiguration(context.Background(), &fakeConfigurations{err: errors.New("AccessDenied")}, "orders", log); cfg != nil {
		t.Fatalf("configuration %+v when Lambda refuses, want none", cfg)
	}
}

// TestLambdaTimeout: a lambda: target's invocations are bounded by the function's own timeout on
// Lambda when it is longer than --timeout (the audit's defect 5: esm's 3 s default bounded a
// 60 s function), by --timeout when it is longer, and by Lambda's maximum when the function's
// cannot be read and no timeout was given. A --timeout shorter than the function's is warned
// about. Fails with the function's timeout ignored.
func TestLambdaTimeout(t *testing.T) {
	own := &awslambda.GetFunctionConfigurationOutput{Timeout: aws.Int32(60)}
	for _, tt := range []struct {
		name     string
		cfg      *awslambda.GetFunctionConfigurationOutput
		timeout  time.Duration
		explicit bool
		want     time.Duration
		warned   bool
	}{
		{"default --timeout, function's longer", own, 3 * time.Second, false, 60 * time.Second, false},
		{"--timeout shorter", own, 30 * time.Second, true, 60 * time.Second, true},
		{"--timeout longer", own, 120 * time.Second, true, 120 * time.Second, false},
		{"unread, --timeout given", nil, 30 * time.Second, true, 30 * time.Second, true},
		{"unread, nothing given", nil, 3 * time.Second, false, lambdaMaxTimeout, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			log := slog.New(slog.NewTextHandler(&out, nil))
			if got := lambdaTimeout(tt.cfg, tt.timeout, tt.explicit, "orders", log); got != tt.want {
				t.Errorf("timeout %v, want %v", got, tt.want)
			}
			if warned := strings.Contains(out.String(), "level=WARN"); warned != tt.warned {
				t.Errorf("warned %v, want %v: %s", warned, tt.warned, out.String())
			}
		})
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
