package execenv

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestEnvironmentIsLambdas: a function that prints the environment it was started with sees
// Lambda's variables, its own (the template's), the credentials it was given and the one variable
// passed by name; nothing else of esm's environment, no ESM_* variable and none of esm's secrets.
func TestEnvironmentIsLambdas(t *testing.T) {
	// esm's own environment, as in the reproduction: the API's admin key, esm's own AWS
	// secret, and a variable the user passes on by name.
	t.Setenv("ESM_API_CREDENTIALS", "ADMINKEY:topsecret")
	t.Setenv("ESM_LOG_LEVEL", "debug")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDESMOWN")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "esm-own-secret")
	t.Setenv("AWS_PROFILE", "esm-profile")
	t.Setenv("HOME", "/home/esm")
	t.Setenv("PASSED_ON", "by name")
	fnCreds := func(context.Context) (Credentials, error) {
		return Credentials{AccessKeyID: "AKIDFUNCTION", SecretAccessKey: "function-secret", SessionToken: "function-token"}, nil
	}
	h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "env", "TEMPLATE_VAR": "from the template", "LANG": "C.UTF-8"},
		WithHandler("function.handler"), WithPassEnv("PASSED_ON", "NOT_SET_ANYWHERE"), WithCredentials(fnCreds), WithMemorySize(256))
	resp := h.invoke(t)
	if resp.Failed() {
		t.Fatalf("invoke: %s", resp.Payload)
	}
	got := testkit.Environ(t, resp.Payload)
	allowed := []string{
		// Lambda's reserved variables.
		"AWS_LAMBDA_RUNTIME_API", "_HANDLER", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_LAMBDA_FUNCTION_NAME",
		"AWS_LAMBDA_FUNCTION_VERSION", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_LAMBDA_INITIALIZATION_TYPE",
		"AWS_LAMBDA_LOG_GROUP_NAME", "AWS_LAMBDA_LOG_STREAM_NAME", "LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR",
		// The function's own credentials.
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		// Set as Lambda sets them, changeable by the function's configuration.
		"PATH", "LANG", "TZ", "LD_LIBRARY_PATH",
		// The template's, and the one passed by name.
		"BASH_FAIL", "TEMPLATE_VAR", "PASSED_ON",
	}
	keys := slices.Sorted(maps.Keys(got))
	for _, k := range keys {
		if strings.HasPrefix(k, "ESM_") || !slices.Contains(allowed, k) {
			t.Errorf("the function sees %s=%q, which is not on the allow-list", k, got[k])
		}
	}
	for _, k := range allowed {
		if _, ok := got[k]; !ok {
			t.Errorf("the function does not see %s (it sees %v)", k, keys)
		}
	}
	for k, want := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDFUNCTION", "AWS_SECRET_ACCESS_KEY": "function-secret", "AWS_SESSION_TOKEN": "function-token",
		"PATH": lambdaPATH, "TZ": ":UTC", "LANG": "C.UTF-8", "TEMPLATE_VAR": "from the template", "PASSED_ON": "by name",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "AWS_LAMBDA_FUNCTION_NAME": "fn",
	} {
		if got[k] != want {
			t.Errorf("%s=%q, want %q", k, got[k], want)
		}
	}
	for _, secret := range []string{"topsecret", "esm-own-secret", "AKIDESMOWN"} {
		if slices.Contains(slices.Collect(maps.Values(got)), secret) {
			t.Errorf("esm's secret %q reached the function", secret)
		}
	}
}

// TestEnvironmentWithoutCredentials: with no credentials given, the function has none, not esm's.
func TestEnvironmentWithoutCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDESMOWN")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "esm-own-secret")
	t.Setenv("AWS_SESSION_TOKEN", "esm-token")
	// Even named, esm's own credentials do not pass: the function's credentials are reserved.
	h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "env"}, WithHandler("function.handler"),
		WithPassEnv("AWS_SECRET_ACCESS_KEY"))
	resp := h.invoke(t)
	got := testkit.Environ(t, resp.Payload)
	for _, k := range credentialVars {
		if _, ok := got[k]; ok {
			t.Errorf("the function has %s without credentials given", k)
		}
	}
}
