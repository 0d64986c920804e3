package helm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kinesis-esm/esm/deploy/image"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// The rendered pod runs: the chart's Deployment for an example values file is rendered and
// decoded strictly; its esm container runs from the root file system of the image "make image"
// built (bin/image/oci), chrooted in its own mount and PID namespaces as the container's user,
// with the container's arguments, environment, ports and volumes; a sidecar runs as
// aws-lambda-rie with the example bootstrap, standing in for a Lambda base image's entrypoint.
// Against kinesis-local and dynalite, the pod must become ready on its readiness probe, deliver
// every record put to the function, and exit 0 on SIGTERM within its grace period.

const (
	// esmModule is esm's checkout, where aws-lambda-rie and the example bootstrap are built.
	esmModule = "../.."
	// imageLayout is where make image writes esm's image.
	imageLayout      = "../../bin/image/oci"
	bootstrapPackage = "github.com/kinesis-esm/esm/example/bootstrap"
	podRecords       = 20
)

// podTemplate is the mapping the pods run: the test's stream, read from its start, with the
// example function dumping every event it gets to /tmp (the function's environment under exec:).
const podTemplate = `AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  StreamName:
    Type: String
Resources:
  PodFunction:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: pod-function
      Runtime: provided.al2023
      Handler: bootstrap
      Timeout: 10
      Environment:
        Variables:
          EXAMPLE_EVENT_DUMP: /tmp/events.jsonl
      Events:
        Stream:
          Type: Kinesis
          Properties:
            Stream: !Sub "arn:${AWS::Partition}:kinesis:${AWS::Region}:${AWS::AccountId}:stream/${StreamName}"
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
            MaximumBatchingWindowInSeconds: 0
`

// requireRoot skips the test unless it runs as root on Linux (namespaces, chroot, a change of
// user), or fails it when ESM_REQUIRE_POD is set, as CI does: there it must run.
func requireRoot(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "linux" && os.Geteuid() == 0 {
		return
	}
	const why = "the rendered-pod test needs root on Linux (mount and PID namespaces, chroot, setuid)"
	if os.Getenv("ESM_REQUIRE_POD") != "" {
		t.Fatal(why + "; ESM_REQUIRE_POD is set")
	}
	t.Skip(why + "; set ESM_REQUIRE_POD=1 to fail instead")
}

// podWorld is what every pod run shares: the emulators, the binaries and esm's image.
type podWorld struct {
	kinesisURL, dynamoURL string
	kin                   *kinesis.Client
	rie, bootstrap        string
	esm                   v1.ImageIndex
}

var (
	worldOnce sync.Once
	world     *podWorld
	worldErr  error
)

func setupWorld(t *testing.T) *podWorld {
	t.Helper()
	worldOnce.Do(func() { world, worldErr = newWorld() })
	if worldErr != nil {
		t.Fatal(worldErr)
	}
	return world
}

func newWorld() (*podWorld, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := &podWorld{}
	var err error
	if w.esm, err = image.ReadLayout(imageLayout); err != nil {
		return nil, fmt.Errorf("esm's image (run make image first): %w", err)
	}
	// The emulators of make test; a private kinesis-local or dynalite otherwise, left running
	// until the test binary exits.
	if w.kinesisURL, w.kin, _, err = testenv.Kinesis(ctx); err != nil {
		return nil, err
	}
	if w.dynamoURL, _, err = testenv.DynamoEndpoint(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "esm-pod-bin-")
	if err != nil {
		return nil, err
	}
	if w.rie, err = testenv.BuildRIE(ctx, dir, esmModule); err != nil {
		return nil, err
	}
	w.bootstrap = filepath.Join(dir, "bootstrap")
	return w, testenv.BuildBootstrap(ctx, esmModule, w.bootstrap, bootstrapPackage, "")
}

// TestRenderedPodRuns runs the pod of the sidecar and the exec: examples.
func TestRenderedPodRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pod against the emulators (make test)")
	}
	requireRoot(t)
	w := setupWorld(t)
	for _, name := range []string{"sidecar", "exec"} {
		t.Run(name, func(t *testing.T) { runPodOf(t, w, name) })
	}
}

// runPodOf runs the pod of the example values file name, with the cluster's part of the values:
// where the emulators are and the credentials (what IRSA gives on EKS), the test's stream, lease
// table and ports.
func runPodOf(t *testing.T, w *podWorld, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream := fmt.Sprintf("pod-%s-%d", name, os.Getpid())
	if _, err := local.CreateStream(ctx, w.kin, stream, 2); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	over := map[string]any{
		"leaseTable": stream + "-leases",
		"template":   podTemplate,
		"metrics":    map[string]any{"port": testkit.FreePort(t)},
		"env": map[string]any{
			"AWS_ENDPOINT_URL_KINESIS":  w.kinesisURL,
			"AWS_ENDPOINT_URL_DYNAMODB": w.dynamoURL,
			"AWS_ACCESS_KEY_ID":         "local",
			"AWS_SECRET_ACCESS_KEY":     "local",
			"ESM_PARAMETER_OVERRIDES":   "AWS::AccountId=" + local.DefaultAccountID + " StreamName=" + stream,
			"ESM_POLL_INTERVAL":         "200ms",
		},
	}
	img := w.esm
	dump := filepath.Join(dir, "rootfs", "tmp", "events.jsonl") // the exec: function's /tmp
	switch name {
	case "sidecar":
		dump = filepath.Join(dir, "sidecar-events.jsonl")
		over["function"] = map[string]any{"sidecar": map[string]any{"port": testkit.FreePort(t),
			"env": map[string]any{"EXAMPLE_EVENT_DUMP": dump}}}
	case "exec":
		var err error
		if img, err = image.AddBootstrap(w.esm, map[string]string{runtime.GOARCH: w.bootstrap}, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	vals := values(t, examples(t)[name], over)
	p := startPod(ctx, t, w, podFrom(t, vals, img, dir))
	p.waitReady(ctx, t)
	put(ctx, t, w.kin, stream)
	waitDelivered(ctx, t, dump, p)
	p.stop(t)
}

// put writes podRecords records, "record-0" to "record-19", under as many keys.
func put(ctx context.Context, t *testing.T, kin *kinesis.Client, stream string) {
	t.Helper()
	recs := make([]local.Record, podRecords)
	for i := range recs {
		recs[i] = local.Record{PartitionKey: strconv.Itoa(i), Data: []byte(fmt.Sprintf("record-%d", i))}
	}
	if _, err := local.PutRecords(ctx, kin, stream, recs); err != nil {
		t.Fatal(err)
	}
}

// waitDelivered waits until the function's event dump holds every record put, each once.
func waitDelivered(ctx context.Context, t *testing.T, dump string, p *pod) {
	t.Helper()
	var seen map[string]int
	for {
		seen = map[string]int{}
		if b, err := os.ReadFile(dump); err == nil {
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var e events.KinesisEvent
				if json.Unmarshal(sc.Bytes(), &e) != nil {
					continue // a line being written
				}
				for _, r := range e.Records {
					seen[string(r.Kinesis.Data)]++
				}
			}
		}
		if len(seen) == podRecords {
			break
		}
		select {
		case <-ctx.Done():
			p.fail(t, "the function got %d of %d records: %v", len(seen), podRecords, seen)
		case <-p.exited:
			p.fail(t, "esm exited before the function got every record (%d of %d)", len(seen), podRecords)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for i := range podRecords {
		if n := seen[fmt.Sprintf("record-%d", i)]; n != 1 {
			t.Errorf("record-%d delivered %d times", i, n)
		}
	}
}

// get returns the status of GET url, or an error.
func get(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
