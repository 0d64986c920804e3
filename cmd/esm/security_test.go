package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// envTemplate is a function run by the bash runtime of execenv's tests, answering with the
// environment it was started with.
const envTemplate = `Transform: AWS::Serverless-2016-10-31
Resources:
  Printer:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: envprinter
      Handler: function.handler
      Runtime: provided.al2023
      CodeUri: .
      MemorySize: 256
      Environment:
        Variables:
          BASH_FAIL: env
          FROM_TEMPLATE: template-value
      Events:
        S:
          Type: Kinesis
          Properties:
            Stream: arn:aws:kinesis:us-east-1:123456789012:stream/s
            StartingPosition: TRIM_HORIZON
`

// invokeEnv runs "esm invoke" of the environment printer with esm's environment env and the
// extra args, and returns the function's environment.
func invokeEnv(t *testing.T, env []string, args ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	tpl := filepath.Join(dir, "template.yaml")
	if err := os.WriteFile(tpl, []byte(envTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	bootstrap, err := filepath.Abs("../../invoke/execenv/testdata/bash-runtime/bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"invoke", "--template", tpl, "--event", "-", "--invoke", "exec:" + bootstrap}, args...)
	code, out, stderr := runESMEnv(t, env, `{"Records":[]}`, args...)
	if code != 0 {
		t.Fatalf("esm invoke: exit %d: %s %s", code, out, stderr)
	}
	return testkit.Environ(t, []byte(out))
}

// lambdaVars are the variables every exec: function gets: Lambda's reserved ones and those Lambda
// sets that a function may change.
var lambdaVars = []string{"AWS_LAMBDA_RUNTIME_API", "_HANDLER", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_LAMBDA_FUNCTION_NAME",
	"AWS_LAMBDA_FUNCTION_VERSION", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_LAMBDA_INITIALIZATION_TYPE",
	"AWS_LAMBDA_LOG_GROUP_NAME", "AWS_LAMBDA_LOG_STREAM_NAME", "LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR",
	"PATH", "LANG", "TZ", "LD_LIBRARY_PATH"}

// exactly checks that the function's environment has exactly the allowed variables.
func exactly(t *testing.T, got map[string]string, allowed ...string) {
	t.Helper()
	allowed = append(allowed, lambdaVars...)
	for k, v := range got {
		if strings.HasPrefix(k, "ESM_") || !slices.Contains(allowed, k) {
			t.Errorf("the function sees %s=%q, outside the allow-list", k, v)
		}
	}
	for _, k := range allowed {
		if _, ok := got[k]; !ok {
			t.Errorf("the function does not see %s", k)
		}
	}
}

// TestExecFunctionSeesOnlyLambdasEnvironment is the reproduction through the esm binary:
// esm's environment holds the API's admin key and esm's own AWS secret; the function sees
// neither the key nor any ESM_* variable nor anything else of esm's, only Lambda's variables, the
// template's, the one passed by name and the credentials --function-credentials gives it.
func TestExecFunctionSeesOnlyLambdasEnvironment(t *testing.T) {
	home := t.TempDir()
	credsFile := filepath.Join(home, "credentials")
	if err := os.WriteFile(credsFile, []byte("[fn]\naws_access_key_id = AKIDFNPROFILE\naws_secret_access_key = fn-profile-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	esmEnv := []string{"ESM_API_CREDENTIALS=ADMINKEY:topsecret", "AWS_ACCESS_KEY_ID=AKIDESMOWN", "AWS_SECRET_ACCESS_KEY=esm-own-secret",
		"ESM_LOG_LEVEL=info", "UNRELATED_SECRET=db-password", "PASSED_ON=by-name",
		"AWS_SHARED_CREDENTIALS_FILE=" + credsFile, "AWS_CONFIG_FILE=" + filepath.Join(home, "config")}

	t.Run("esm's credentials, as sam local passes the developer's", func(t *testing.T) {
		got := invokeEnv(t, esmEnv, "--function-env-pass", "PASSED_ON")
		exactly(t, got, "BASH_FAIL", "FROM_TEMPLATE", "PASSED_ON", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
		if got["AWS_ACCESS_KEY_ID"] != "AKIDESMOWN" || got["AWS_SECRET_ACCESS_KEY"] != "esm-own-secret" || got["PASSED_ON"] != "by-name" ||
			got["FROM_TEMPLATE"] != "template-value" || got["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] != "256" || got["AWS_LAMBDA_FUNCTION_NAME"] != "envprinter" {
			t.Errorf("environment %v", got)
		}
	})
	t.Run("none", func(t *testing.T) {
		exactly(t, invokeEnv(t, esmEnv, "--function-credentials", "none"), "BASH_FAIL", "FROM_TEMPLATE")
	})
	t.Run("a profile of its own", func(t *testing.T) {
		got := invokeEnv(t, append(esmEnv, "ESM_FUNCTION_CREDENTIALS=profile:fn"))
		exactly(t, got, "BASH_FAIL", "FROM_TEMPLATE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
		if got["AWS_ACCESS_KEY_ID"] != "AKIDFNPROFILE" || got["AWS_SECRET_ACCESS_KEY"] != "fn-profile-secret" {
			t.Errorf("credentials %s/%s, want the profile's", got["AWS_ACCESS_KEY_ID"], got["AWS_SECRET_ACCESS_KEY"])
		}
	})
	t.Run("a bad mode", func(t *testing.T) {
		code, _, stderr := runESMEnv(t, esmEnv, `{}`, "invoke", "--event", "-", "--invoke", "exec:/bin/true", "--function-credentials", "mine")
		if code != 2 || !strings.Contains(stderr, "want esm, none or profile:NAME") {
			t.Errorf("exit %d: %s", code, stderr)
		}
	})
}
