// Package helm holds esm's Helm chart (esm/); its tests lint the chart with each example values
// file, render every object strictly into Kubernetes' Go types, refuse the defaults (they name
// no function), check the alerts' metrics, check that deploy/kubernetes/esm.yaml is the sidecar
// example's rendering, and run the rendered pod from esm's image (pod_test.go).
package helm

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

var updateManifest = flag.Bool("update-manifest", false, "rewrite deploy/kubernetes/esm.yaml from the chart")

const (
	chartDir = "esm"
	manifest = "../kubernetes/esm.yaml"
)

// examples are the chart's example values files, by name ("sidecar", "exec", "lambda").
func examples(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(chartDir, "examples", "*.yaml"))
	if err != nil || len(paths) < 3 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	out := map[string]string{}
	for _, p := range paths {
		out[strings.TrimSuffix(filepath.Base(p), ".yaml")] = p
	}
	return out
}

// values reads a values file ("" for none) with over merged onto it.
func values(t *testing.T, file string, over map[string]any) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if file != "" {
		v, err := chartutil.ReadValuesFile(file)
		if err != nil {
			t.Fatal(err)
		}
		vals = v.AsMap()
	}
	return merge(vals, over)
}

// merge sets over's keys into dst, maps merged key by key, and returns dst.
func merge(dst, over map[string]any) map[string]any {
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = merge(maps.Clone(dm), vm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// renderFiles renders the chart as release esm in namespace esm with vals over the defaults
// (validated against values.schema.json, as helm install does), or returns the error.
func renderFiles(vals map[string]any) (string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", err
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "esm", Namespace: "esm", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return "", err
	}
	var all bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, ".yaml") {
			fmt.Fprintf(&all, "---\n%s\n", files[name])
		}
	}
	return all.String(), nil
}

// render is renderFiles' objects by "Kind/name", failing the test on an error.
func render(t *testing.T, vals map[string]any) map[string]map[string]any {
	t.Helper()
	out, err := renderFiles(vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return objects(t, []byte(out))
}

// documents splits a multi-document manifest into its non-empty documents.
func documents(b []byte) [][]byte {
	var out [][]byte
	for _, doc := range bytes.Split(append([]byte("\n"), b...), []byte("\n---\n")) {
		doc = append(doc, '\n') // the separator took the last line's newline
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
	return out
}

// objects parses a multi-document manifest into its objects by "Kind/name".
func objects(t *testing.T, b []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range documents(b) {
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
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

// TestLint runs helm lint --strict on the chart with each example values file: no warning or
// error.
func TestLint(t *testing.T) {
	for name, file := range examples(t) {
		l := lint.All(chartDir, values(t, file, nil), "esm", true)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", name, m)
			}
		}
	}
}

// TestDefaultsRefused: helm install of the defaults (rendered: a dry run, as helm template)
// fails with a message naming the values to set, and so do values the schema refuses.
func TestDefaultsRefused(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := func(vals map[string]any) error {
		in := action.NewInstall(&action.Configuration{})
		in.DryRun, in.ClientOnly, in.ReleaseName, in.Namespace = true, true, "esm", "esm"
		_, err := in.Run(ch, vals)
		return err
	}
	err = install(nil)
	t.Logf("helm install of the defaults: %v", err)
	for _, want := range []string{"no function to invoke", "function.sidecar.image", "function.exec.path", "function.lambda.name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the defaults: error %v, want one naming %q", err, want)
		}
	}
	for name, vals := range map[string]map[string]any{
		"two functions":   {"function": map[string]any{"exec": map[string]any{"path": "/var/task/bootstrap"}, "lambda": map[string]any{"name": "f"}}},
		"a typo":          {"function": map[string]any{"sidecr": map[string]any{"image": "f"}}},
		"no image":        {"function": map[string]any{"sidecar": map[string]any{}}},
		"a relative path": {"function": map[string]any{"exec": map[string]any{"path": "bootstrap"}}},
		"no account name": {"function": map[string]any{"lambda": map[string]any{"name": "f"}}, "serviceAccount": map[string]any{"create": false}},
		"a short grace":   {"function": map[string]any{"lambda": map[string]any{"name": "f"}}, "terminationGracePeriodSeconds": 30},
	} {
		if err := install(vals); err == nil {
			t.Errorf("%s: installed", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	for name, file := range examples(t) {
		if err := install(values(t, file, nil)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRenderIsTheManifest: the sidecar example's rendering is deploy/kubernetes/esm.yaml, object
// by object (the manifest's comments aside).
//
// go test -run TestRenderIsTheManifest -update-manifest rewrites the manifest's objects (its
// opening comment stays).
func TestRenderIsTheManifest(t *testing.T) {
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if *updateManifest {
		out, err := renderFiles(values(t, examples(t)["sidecar"], nil))
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(b), "\n---\n")
		if err := os.WriteFile(manifest, []byte(head+"\n"+strings.TrimSpace(out)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		b, _ = os.ReadFile(manifest)
	}
	want := objects(t, b)
	got := render(t, values(t, examples(t)["sidecar"], nil))
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
