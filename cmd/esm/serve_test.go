package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

// These tests drive "esm serve" with the AWS CLI v2 (Debian's awscli package; .ci/run installs
// it), as a user would.

// awsCLI finds an AWS CLI v2: $ESM_TEST_AWS_CLI, else the first "aws" v2 on PATH or
// /usr/bin/aws. Without one the test fails under CI (ESM_REQUIRE_AWSCLI set) and is skipped
// elsewhere.
func awsCLI(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("ESM_TEST_AWS_CLI")}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		candidates = append(candidates, filepath.Join(dir, "aws"))
	}
	candidates = append(candidates, "/usr/bin/aws")
	for _, c := range candidates {
		if c == "" {
			continue
		}
		out, err := exec.Command(c, "--version").CombinedOutput()
		if err == nil && strings.HasPrefix(string(out), "aws-cli/2.") {
			return c
		}
	}
	if os.Getenv("ESM_REQUIRE_AWSCLI") != "" {
		t.Fatal("no AWS CLI v2 found (apt-get install awscli)")
	}
	t.Skip("no AWS CLI v2 found (apt-get install awscli, or set ESM_TEST_AWS_CLI)")
	return ""
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs "esm serve" on a free loopback port and waits until it answers.
func startServe(t *testing.T, env []string, args ...string) (*esmProc, string) {
	t.Helper()
	addr := freeAddr(t)
	p := spawnESM(t, env, append([]string{"serve", "--endpoint-url", kinesisEndpoint, "--api-addr", addr, "--poll-interval", "100ms"}, args...)...)
	testkit.WaitFor(t, "esm serve to listen", 20*time.Second, func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("esm serve exited: %v\n%s", err, p.stderr.String())
		default:
		}
		return strings.Contains(p.stderr.String(), "esm serve:")
	})
	return p, "http://" + addr
}

// awsRun runs the AWS CLI against endpoint with local credentials; nothing leaves the machine.
type awsRun struct {
	bin, endpoint string
	env           []string
	service       string   // the CLI's command: lambda unless set
	global        []string // global options, such as --ca-bundle
}

func newAWS(t *testing.T, endpoint, key, secret string) awsRun {
	home := t.TempDir()
	return awsRun{bin: awsCLI(t), endpoint: endpoint, env: []string{
		"AWS_ACCESS_KEY_ID=" + key, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_DEFAULT_REGION=" + local.DefaultRegion,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "credentials"), "HOME=" + home, "AWS_PAGER=",
		"PATH=" + os.Getenv("PATH"),
	}}
}

// run runs "aws lambda <args>" and returns its exit code, stdout and stderr.
func (a awsRun) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	service := a.service
	if service == "" {
		service = "lambda"
	}
	base := append([]string{service, "--endpoint-url", a.endpoint, "--no-cli-pager", "--output", "json"}, a.global...)
	cmd := exec.CommandContext(ctx, a.bin, append(base, args...)...)
	cmd.Env = a.env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// mapping runs a command that must print a mapping.
func (a awsRun) mapping(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errs := a.run(t, args...)
	if code != 0 {
		t.Fatalf("aws lambda %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("aws lambda %s: %q: %v", args[0], out, err)
	}
	return m
}

func (a awsRun) waitState(t *testing.T, id, want string) {
	t.Helper()
	testkit.WaitFor(t, "state "+want, 30*time.Second, func() bool {
		return a.mapping(t, "get-event-source-mapping", "--uuid", id)["State"] == want
	})
}

// TestServeAWSCLI is the AWS CLI's story: create, get, list, update (BatchSize, disable, enable)
// and delete, with records delivered to the in-process example function, and the CLI's errors.
func TestServeAWSCLI(t *testing.T) {
	name := newStream(t, 1)
	out := filepath.Join(t.TempDir(), "deliveries.jsonl")
	_, endpoint := startServe(t, []string{"EXAMPLE_OUTPUT=" + out}, "--state-dir", t.TempDir(), "--function", "example=example")
	a := newAWS(t, endpoint, "AKIDLOCAL", "local")
	arn := fmt.Sprintf("arn:aws:kinesis:%s:000000000000:stream/%s", local.DefaultRegion, name)

	created := a.mapping(t, "create-event-source-mapping", "--function-name", "example", "--event-source-arn", arn, "--starting-position", "TRIM_HORIZON")
	id, _ := created["UUID"].(string)
	if created["State"] != "Creating" || created["BatchSize"] != 100.0 || created["MaximumRetryAttempts"] != -1.0 ||
		created["FunctionArn"] != "arn:aws:lambda:us-east-1:000000000000:function:example" || id == "" {
		t.Fatalf("create: %v", created)
	}
	a.waitState(t, id, "Enabled")
	delivered := func(want ...string) func() bool {
		return func() bool {
			ds, _ := verify.ReadDeliveries(out)
			var got []string
			for _, d := range ds {
				got = append(got, d.Data)
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					return false
				}
			}
			return true
		}
	}
	putRecords(t, name, "cli-1", "cli-2", "cli-3")
	testkit.WaitFor(t, "the records", 20*time.Second, delivered("cli-1", "cli-2", "cli-3"))

	code, listOut, errs := a.run(t, "list-event-source-mappings", "--function-name", "example", "--event-source-arn", arn)
	if code != 0 || !strings.Contains(listOut, id) {
		t.Fatalf("list: exit %d: %s %s", code, listOut, errs)
	}

	u := a.mapping(t, "update-event-source-mapping", "--uuid", id, "--batch-size", "5")
	if u["State"] != "Updating" || u["BatchSize"] != 5.0 {
		t.Fatalf("update: %v", u)
	}
	a.waitState(t, id, "Enabled")
	if d := a.mapping(t, "update-event-source-mapping", "--uuid", id, "--no-enabled"); d["State"] != "Disabling" {
		t.Fatalf("disable: %v", d)
	}
	a.waitState(t, id, "Disabled")
	if e := a.mapping(t, "update-event-source-mapping", "--uuid", id, "--enabled"); e["State"] != "Enabling" {
		t.Fatalf("enable: %v", e)
	}
	a.waitState(t, id, "Enabled")
	putRecords(t, name, "cli-4")
	testkit.WaitFor(t, "a record after the updates", 20*time.Second, delivered("cli-4"))

	// The CLI shows AWS's errors: a second mapping of the same function and stream.
	code, _, errs = a.run(t, "create-event-source-mapping", "--function-name", "example", "--event-source-arn", arn, "--starting-position", "LATEST")
	if code == 0 || !strings.Contains(errs, "ResourceConflictException") || !strings.Contains(errs, "Please update or delete the existing mapping with UUID "+id) {
		t.Fatalf("duplicate: exit %d: %s", code, errs)
	}

	if d := a.mapping(t, "delete-event-source-mapping", "--uuid", id); d["State"] != "Deleting" {
		t.Fatalf("delete: %v", d)
	}
	testkit.WaitFor(t, "get after delete to fail", 20*time.Second, func() bool {
		code, _, errs := a.run(t, "get-event-source-mapping", "--uuid", id)
		return code != 0 && strings.Contains(errs, "ResourceNotFoundException") && strings.Contains(errs, "The resource you requested does not exist.")
	})
}

// TestServeAWSCLISigned: with --api-credentials every request must be signed with that key; the
// CLI's SigV4 signatures are verified, and a wrong secret is refused as AWS refuses it. The
// secret never reaches the log.
func TestServeAWSCLISigned(t *testing.T) {
	p, endpoint := startServe(t, nil, "--state-dir", t.TempDir(), "--function", "example=example", "--api-credentials", "AKIDSERVE:serve-secret-value")
	code, out, errs := newAWS(t, endpoint, "AKIDSERVE", "serve-secret-value").run(t, "list-event-source-mappings")
	if code != 0 || !strings.Contains(out, "EventSourceMappings") {
		t.Fatalf("signed list: exit %d: %s %s", code, out, errs)
	}
	code, _, errs = newAWS(t, endpoint, "AKIDSERVE", "wrong").run(t, "list-event-source-mappings")
	if code == 0 || !strings.Contains(errs, "InvalidSignatureException") {
		t.Fatalf("wrong secret: exit %d: %s", code, errs)
	}
	if strings.Contains(p.stderr.String(), "serve-secret-value") {
		t.Fatal("the secret is in the log")
	}
}

// TestServeTLSWithAWSCLI: esm serve over HTTPS (a self-signed certificate made here) with
// credentials, driven by the AWS CLI with --ca-bundle: the CLI's signed requests are answered; a
// request signed for another region or another service is refused as AWS refuses it; a client
// that does not trust the certificate gets no answer.
func TestServeTLSWithAWSCLI(t *testing.T) {
	cert, key := testkit.SelfSignedCert(t, t.TempDir())
	p, endpoint := startServe(t, nil, "--state-dir", t.TempDir(), "--function", "example=example",
		"--api-credentials", "AKIDSERVE:serve-secret-value", "--api-tls-cert", cert, "--api-tls-key", key)
	endpoint = "https://" + strings.TrimPrefix(endpoint, "http://")
	if !strings.Contains(p.stderr.String(), "scheme=https") {
		t.Fatalf("esm serve does not say it serves HTTPS:\n%s", p.stderr.String())
	}
	a := newAWS(t, endpoint, "AKIDSERVE", "serve-secret-value")
	a.global = []string{"--ca-bundle", cert}

	stream := newStream(t, 1)
	arn := fmt.Sprintf("arn:aws:kinesis:%s:000000000000:stream/%s", local.DefaultRegion, stream)
	created := a.mapping(t, "create-event-source-mapping", "--function-name", "example", "--event-source-arn", arn, "--starting-position", "LATEST")
	id, _ := created["UUID"].(string)
	if id == "" || created["State"] != "Creating" {
		t.Fatalf("create over HTTPS: %v", created)
	}
	code, out, errs := a.run(t, "list-event-source-mappings")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("list over HTTPS: exit %d: %s %s", code, out, errs)
	}

	otherRegion := a
	otherRegion.env = append(slices.Clone(a.env), "AWS_DEFAULT_REGION=eu-west-1")
	code, _, errs = otherRegion.run(t, "list-event-source-mappings")
	if code == 0 || !strings.Contains(errs, "(InvalidSignatureException)") ||
		!strings.Contains(errs, "Credential should be scoped to a valid region, not 'eu-west-1'.") {
		t.Fatalf("signed for eu-west-1: exit %d: %s", code, errs)
	}
	// Signed by the CLI's Kinesis commands (JSON 1.1, which reads an error's code from the body's
	// __type: it shows the status; the type header is checked by esmapi's golden test).
	otherService := a
	otherService.service = "kinesis"
	code, _, errs = otherService.run(t, "list-streams")
	if code == 0 || !strings.Contains(errs, "(403)") ||
		!strings.Contains(errs, "Credential should be scoped to correct service: 'lambda'.") {
		t.Fatalf("signed for kinesis: exit %d: %s", code, errs)
	}
	untrusting := a
	untrusting.global = nil
	code, _, errs = untrusting.run(t, "list-event-source-mappings")
	if code == 0 || !strings.Contains(errs, "SSL") {
		t.Fatalf("without --ca-bundle: exit %d: %s; want the certificate refused", code, errs)
	}
	if strings.Contains(p.stderr.String(), "serve-secret-value") {
		t.Fatal("the secret is in the log")
	}
}

// TestServeRefusesPlaintextBeyondLoopback: with credentials but without TLS, a non-loopback
// --api-addr is refused at start (exit 2, before anything listens). The address is TEST-NET-1's,
// which no interface here has: were the check gone, the bind would fail too, and nothing would
// listen beyond loopback.
func TestServeRefusesPlaintextBeyondLoopback(t *testing.T) {
	out, err := exec.Command(esmBin, "serve", "--api-addr", "192.0.2.1:0", "--api-credentials", "AKIDSERVE:secret",
		"--state-dir", t.TempDir(), "--function", "example=example").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--api-tls-cert FILE --api-tls-key FILE") ||
		!strings.Contains(string(out), "--api-insecure-plaintext") {
		t.Fatalf("exit %v: %s", err, out)
	}
}

// TestServeRefusesOpenBindWithoutCredentials: beyond loopback, esm serve needs --api-credentials.
func TestServeRefusesOpenBindWithoutCredentials(t *testing.T) {
	cmd := exec.Command(esmBin, "serve", "--api-addr", "0.0.0.0:0", "--state-dir", t.TempDir(), "--function", "example=example")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--api-credentials") {
		t.Fatalf("exit %v: %s", err, out)
	}
}

// TestServeWithoutFunctions: a serve that could invoke nothing is a usage error.
func TestServeWithoutFunctions(t *testing.T) {
	out, err := exec.Command(esmBin, "serve", "--api-addr", freeAddr(t), "--state-dir", t.TempDir()).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--function NAME=TARGET") {
		t.Fatalf("exit %v: %s", err, out)
	}
}

// TestServeTemplate: --template creates the template's mapping, with its settings, when it does
// not exist yet; a restart with the same template finds it and creates no second one.
func TestServeTemplate(t *testing.T) {
	stream := newStream(t, 1)
	dir := t.TempDir()
	tmpl := writeTemplate(t, dir, stream, "BatchSize: 5")
	out := filepath.Join(dir, "deliveries.jsonl")
	state := filepath.Join(dir, "state")
	args := []string{"--state-dir", state, "--template", tmpl, "--function", "Fn=example"}
	list := func(endpoint string) []any {
		code, body, errs := newAWS(t, endpoint, "AKIDLOCAL", "local").run(t, "list-event-source-mappings")
		if code != 0 {
			t.Fatalf("list: exit %d: %s", code, errs)
		}
		var l struct{ EventSourceMappings []any }
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatal(err)
		}
		return l.EventSourceMappings
	}
	p, endpoint := startServe(t, []string{"EXAMPLE_OUTPUT=" + out}, args...)
	first := list(endpoint)
	if len(first) != 1 {
		t.Fatalf("mappings after the first start: %v", first)
	}
	m := first[0].(map[string]any)
	if m["BatchSize"] != 5.0 || m["FunctionArn"] != "arn:aws:lambda:us-east-1:000000000000:function:Fn" {
		t.Fatalf("the template's mapping: %v", m)
	}
	putRecords(t, stream, "tmpl-1")
	testkit.WaitFor(t, "the record", 20*time.Second, func() bool {
		ds, _ := verify.ReadDeliveries(out)
		return len(ds) == 1 && ds[0].Data == "tmpl-1"
	})
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, endpoint = startServe(t, []string{"EXAMPLE_OUTPUT=" + out}, args...)
	again := list(endpoint)
	if len(again) != 1 || again[0].(map[string]any)["UUID"] != m["UUID"] {
		t.Fatalf("mappings after a restart: %v, want only %s", again, m["UUID"])
	}
}

func putRecords(t *testing.T, stream string, data ...string) {
	t.Helper()
	recs := make([]local.Record, len(data))
	for i, d := range data {
		recs[i] = local.Record{PartitionKey: d, Data: []byte(d)}
	}
	if _, err := local.PutRecords(context.Background(), kin, stream, recs); err != nil {
		t.Fatal(err)
	}
}
