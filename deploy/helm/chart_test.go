// Package helm holds esm's Helm chart (esm/) in a module of its own, so that helm's dependencies
// stay out of esm's; its tests lint the chart and render it, and check that the default rendering
// is deploy/kubernetes/esm.yaml.
package helm

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "esm"
	manifest = "../kubernetes/esm.yaml"
)

// TestLint runs helm lint on the chart, strict: no warning or error.
func TestLint(t *testing.T) {
	l := lint.All(chartDir, nil, "esm", false)
	for _, m := range l.Messages {
		t.Logf("lint: %s", m)
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
	if l.HighestSeverity >= support.WarningSev {
		t.Fatalf("helm lint found problems (highest severity %d)", l.HighestSeverity)
	}
}

// render renders the chart as release esm in namespace esm with vals over the defaults, and
// returns its objects by "Kind/name".
func render(t *testing.T, vals map[string]any) map[string]map[string]any {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "esm", Namespace: "esm", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var all bytes.Buffer
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasSuffix(name, ".yaml") {
			fmt.Fprintf(&all, "---\n%s\n", files[name])
		}
	}
	return objects(t, all.Bytes())
}

// objects parses a multi-document manifest into its objects by "Kind/name".
func objects(t *testing.T, b []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range bytes.Split(append([]byte("\n"), b...), []byte("\n---\n")) {
		var o map[string]any
		if err := yaml.Unmarshal(append(doc, '\n'), &o); err != nil { // the separator took the last line's newline
			t.Fatalf("%v in\n%s", err, doc)
		}
		if len(o) == 0 {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		key := fmt.Sprintf("%v/%v", o["kind"], meta["name"])
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		out[key] = o
	}
	return out
}

// TestRenderIsTheManifest: the chart's default rendering is deploy/kubernetes/esm.yaml, object
// by object (the manifest's comments aside).
func TestRenderIsTheManifest(t *testing.T) {
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := objects(t, b)
	got := render(t, nil)
	if len(want) != 5 {
		t.Fatalf("%s has %d objects, want 5", manifest, len(want))
	}
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("the chart renders no %s", key)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			gy, _ := yaml.Marshal(g)
			wy, _ := yaml.Marshal(w)
			t.Errorf("%s differs:\nchart:\n%s\nmanifest:\n%s", key, gy, wy)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("the chart renders %s, which %s lacks", key, manifest)
		}
	}
}

// TestRenderWorkers: the values a deployment sets reach the objects: the number of workers, the
// lease table, the metrics port (probes, Service, scrape annotation) and extra arguments.
func TestRenderWorkers(t *testing.T) {
	got := render(t, map[string]any{"replicaCount": 7, "leaseTable": "orders-leases", "metrics": map[string]any{"port": 9100},
		"extraArgs": []any{"--blocked-after", "2m"}, "serviceAccount": map[string]any{"roleArn": ""}})
	dep := got["Deployment/esm"]
	spec := dep["spec"].(map[string]any)
	if spec["replicas"] != float64(7) {
		t.Errorf("replicas %v, want 7", spec["replicas"])
	}
	pod := spec["template"].(map[string]any)
	c := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	args := fmt.Sprint(c["args"])
	for _, want := range []string{"--lease-table orders-leases", "--metrics-addr 0.0.0.0:9100", "--worker-id $(POD_NAME)", "--blocked-after 2m"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %s lack %q", args, want)
		}
	}
	if port := c["ports"].([]any)[0].(map[string]any)["containerPort"]; port != float64(9100) {
		t.Errorf("containerPort %v", port)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if p := c[probe].(map[string]any)["httpGet"].(map[string]any)["port"]; p != "metrics" {
			t.Errorf("%s port %v, want the metrics port by name", probe, p)
		}
	}
	if a := pod["metadata"].(map[string]any)["annotations"].(map[string]any)["prometheus.io/port"]; a != "9100" {
		t.Errorf("scrape annotation port %v", a)
	}
	if p := got["Service/esm-metrics"]["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"]; p != float64(9100) {
		t.Errorf("Service port %v", p)
	}
	if _, ok := got["ServiceAccount/esm"]["metadata"].(map[string]any)["annotations"]; ok {
		t.Error("an IRSA annotation without a role")
	}
}
