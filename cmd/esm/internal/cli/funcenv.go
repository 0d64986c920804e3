package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/kinesis-esm/esm/invoke/target"
)

// The values of --function-credentials.
const (
	credentialsESM     = "esm"
	credentialsNone    = "none"
	credentialsProfile = "profile:"
)

// FunctionEnvFlags say what an exec: function gets of esm's environment: by default Lambda's
// variables, the template's Environment and esm's own AWS credentials as the function's (as sam
// local passes the developer's), and nothing else.
type FunctionEnvFlags struct {
	FunctionEnvPass     []string `name:"function-env-pass" help:"A variable of esm's environment that exec: functions get too (repeatable, or NAME,NAME2). Nothing else of esm's environment reaches them: Lambda's variables, the template's Environment and the function's credentials only." env:"ESM_FUNCTION_ENV_PASS" placeholder:"NAME"`
	FunctionCredentials string   `name:"function-credentials" help:"The AWS credentials exec: functions get as their own (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN): esm (esm's own, as sam local passes the developer's), none, or profile:NAME (that profile of the shared AWS configuration)." default:"esm" env:"ESM_FUNCTION_CREDENTIALS" placeholder:"esm|none|profile:NAME"`
}

// openOptions are the options of an exec: target the flags give (target.WithPassEnv,
// target.WithCredentials); esm is esm's own SDK configuration. A profile is loaded only here, for
// an exec: target.
func (f FunctionEnvFlags) openOptions(ctx context.Context, esm aws.Config) ([]target.Option, error) {
	for _, name := range f.FunctionEnvPass {
		if name == "" || strings.ContainsAny(name, "= \x00") {
			return nil, Usage(fmt.Errorf("--function-env-pass %q: want the name of a variable", name))
		}
	}
	opts := []target.Option{target.WithPassEnv(f.FunctionEnvPass...)}
	switch mode := f.FunctionCredentials; {
	case mode == "" || mode == credentialsESM:
		opts = append(opts, target.WithCredentials(esm.Credentials))
	case mode == credentialsNone:
	case strings.HasPrefix(mode, credentialsProfile) && len(mode) > len(credentialsProfile):
		profile := mode[len(credentialsProfile):]
		cfg, err := config.LoadDefaultConfig(ctx, config.WithSharedConfigProfile(profile))
		if err != nil {
			return nil, Usage(fmt.Errorf("--function-credentials %s: %w", mode, err))
		}
		opts = append(opts, target.WithCredentials(cfg.Credentials))
	default:
		return nil, Usage(fmt.Errorf("--function-credentials %q: want esm, none or profile:NAME", mode))
	}
	return opts, nil
}
