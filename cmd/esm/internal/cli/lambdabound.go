package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/kinesis-esm/esm/invoke/target"
)

// lambdaMaxTimeout is Lambda's longest function timeout (15 minutes).
const lambdaMaxTimeout = 900 * time.Second

// functionConfigurations reads a Lambda function's configuration.
type functionConfigurations interface {
	GetFunctionConfiguration(ctx context.Context, in *awslambda.GetFunctionConfigurationInput, optFns ...func(*awslambda.Options)) (*awslambda.GetFunctionConfigurationOutput, error)
}

// functionConfiguration reads the configuration of a function on Lambda (a lambda: target); nil,
// with a warning, when it cannot be read.
func functionConfiguration(ctx context.Context, api functionConfigurations, function string, logger *slog.Logger) *awslambda.GetFunctionConfigurationOutput {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := api.GetFunctionConfiguration(ctx, &awslambda.GetFunctionConfigurationInput{FunctionName: aws.String(function)})
	if err != nil {
		logger.Warn("the function's configuration on Lambda could not be read", "function", function, "error", err)
		return nil
	}
	return out
}

// lambdaTimeout is the timeout a lambda: target's invocations are bounded by (the invocation
// bound is it plus 10 s: what the lease table's takers and the poller wait for after an
// invocation may have been left running). Lambda stops the function at its own Timeout, whatever
// esm's --timeout says, so it is the longer of timeout (--timeout or the template's) and the
// function's own (cfg). A --timeout shorter than the function's is a mistake worth a loud
// warning, not a refusal: the bound is safe either way. When the configuration could not be read
// (cfg nil), a timeout given (explicit) is trusted, and otherwise Lambda's maximum (900 s) bounds
// the invocations: safe, but a dead worker's shards then wait for it.
func lambdaTimeout(cfg *awslambda.GetFunctionConfigurationOutput, timeout time.Duration, explicit bool, function string, logger *slog.Logger) time.Duration {
	if cfg == nil || cfg.Timeout == nil {
		if explicit {
			logger.Warn("bounding the function's invocations by the timeout given, unchecked", "function", function, "timeout", timeout)
			return timeout
		}
		logger.Warn("the function's timeout is unknown: bounding its invocations by Lambda's maximum (give --timeout, the function's timeout, to shorten the wait for a dead worker's shards)",
			"function", function, "timeout", lambdaMaxTimeout)
		return lambdaMaxTimeout
	}
	own := time.Duration(aws.ToInt32(cfg.Timeout)) * time.Second
	if explicit && timeout < own {
		logger.Warn("--timeout (or the template's Timeout) is shorter than the function's timeout on Lambda, which is what stops it: invocations are bounded by the function's",
			"function", function, "timeout", timeout, "function_timeout", own)
	}
	return max(timeout, own)
}

// boundLambda sets the function timeout of a lambda: target (the first of the --invoke targets) to lambdaTimeout's, which
// the runner's invocation bound and the Invoke client's wait for an answer follow.
func (c *Config) boundLambda(ctx context.Context, targets []target.Target) {
	if len(targets) == 0 || targets[0].Lambda == "" {
		return
	}
	fn := targets[0].Lambda
	cfg := functionConfiguration(ctx, awslambda.NewFromConfig(c.AWS), fn, c.Logger)
	explicit := c.TimeoutGiven || c.Mapping != nil // a template times its function (SAM's default: 3 s)
	c.Run.Function.Timeout = lambdaTimeout(cfg, c.Run.Function.Timeout, explicit, fn, c.Logger)
}
