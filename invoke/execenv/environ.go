package execenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Credentials are the AWS credentials a function gets as its own (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), as Lambda gives a function its execution role's.
type Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// CredentialsFunc returns the credentials of an environment about to start. It is called once
// per environment, so that short-lived credentials are fresh for each.
type CredentialsFunc func(ctx context.Context) (Credentials, error)

// The variables Lambda sets that a function's configuration may change, with Lambda's values
// ("Defined runtime environment variables" in the Lambda Developer Guide). LD_LIBRARY_PATH's
// /var/task entries become the function's directory.
const (
	lambdaPATH = "/usr/local/bin:/usr/bin/:/bin:/opt/bin"
	lambdaLANG = "en_US.UTF-8"
	lambdaTZ   = ":UTC"
)

func lambdaLDLibraryPath(taskRoot string) string {
	return "/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:" + taskRoot + ":" + taskRoot + "/lib:/opt/lib"
}

// credentialVars are the reserved variables of the function's credentials.
var credentialVars = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// WithPassEnv passes these variables of esm's own environment to the function (repeatable; default
// none). Nothing else of esm's environment reaches it: a name given here is the only way for an
// ESM_* variable, or any other, to get there. A passed variable overrides the template's value;
// Lambda's reserved variables always win, and the credential variables (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) come from WithCredentials only.
func WithPassEnv(names ...string) Option {
	return func(c *config) { c.pass = append(c.pass, names...) }
}

// WithCredentials sets where the function's own AWS credentials come from (default: none; the
// function then has no AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or AWS_SESSION_TOKEN). A nil
// func keeps the default.
func WithCredentials(f CredentialsFunc) Option {
	return func(c *config) {
		if f != nil {
			c.credentials = f
		}
	}
}

// environ is the process's environment, built from an allow-list as Lambda builds it: PATH, LANG,
// TZ and LD_LIBRARY_PATH with Lambda's values; then the function's own variables (the template's
// Environment), which may change those four; then the variables of esm's environment that
// WithPassEnv names; then Lambda's reserved variables and the function's credentials, which always
// win. Nothing else of esm's environment is passed.
func (e *environment) environ(ctx context.Context) []string {
	root := filepath.Dir(e.cfg.command[0])
	vars := map[string]string{
		"PATH":            lambdaPATH,
		"LANG":            lambdaLANG,
		"TZ":              lambdaTZ,
		"LD_LIBRARY_PATH": lambdaLDLibraryPath(root),
	}
	for k, v := range e.cfg.env {
		vars[k] = v
	}
	for _, k := range e.cfg.pass {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	now := e.cfg.now().UTC()
	reserved := map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          e.addr,
		"_HANDLER":                        e.cfg.handler,
		"AWS_REGION":                      e.cfg.region,
		"AWS_DEFAULT_REGION":              e.cfg.region,
		"AWS_LAMBDA_FUNCTION_NAME":        e.cfg.functionName,
		"AWS_LAMBDA_FUNCTION_VERSION":     e.cfg.version,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(e.cfg.memoryMB),
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + e.cfg.functionName,
		"AWS_LAMBDA_LOG_STREAM_NAME":      fmt.Sprintf("%s/[%s]%s", now.Format("2006/01/02"), e.cfg.version, strings.ReplaceAll(uuid.NewString(), "-", "")),
		"LAMBDA_TASK_ROOT":                root,
		"LAMBDA_RUNTIME_DIR":              root,
	}
	for k, v := range reserved {
		vars[k] = v
	}
	for _, k := range credentialVars {
		delete(vars, k)
	}
	if e.cfg.credentials != nil {
		c, err := e.cfg.credentials(ctx)
		if err != nil {
			e.cfg.log.Warn("the function's AWS credentials: its environments start without any", "error", err)
		} else {
			for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": c.AccessKeyID, "AWS_SECRET_ACCESS_KEY": c.SecretAccessKey, "AWS_SESSION_TOKEN": c.SessionToken} {
				if v != "" {
					vars[k] = v
				}
			}
		}
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
