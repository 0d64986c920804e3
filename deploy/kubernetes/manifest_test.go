// Package kubernetes holds the example manifests; its test checks that esm.yaml parses and that
// its parts agree with each other and with esm's flags.
package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// shutdownGrace and releaseTimeout are esm's defaults: how long SIGTERM waits for the batches
// in flight, and how long releasing the leases may take after that.
const shutdownGrace, releaseTimeout = 30, 5

type object = map[string]any

// load parses every document of esm.yaml, by kind.
func load(t *testing.T) map[string]object {
	t.Helper()
	raw, err := os.ReadFile("esm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	docs := map[string]object{}
	for {
		var doc object
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("esm.yaml: %v", err)
		}
		if doc == nil {
			continue
		}
		kind, _ := doc["kind"].(string)
		if kind == "" || doc["apiVersion"] == nil || str(doc, "metadata", "name") == "" {
			t.Fatalf("document without kind, apiVersion or metadata.name: %v", doc)
		}
		if _, dup := docs[kind]; dup {
			t.Fatalf("two documents of kind %s", kind)
		}
		docs[kind] = doc
	}
	for _, kind := range []string{"ServiceAccount", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"} {
		if docs[kind] == nil {
			t.Errorf("no %s in esm.yaml", kind)
		}
	}
	return docs
}

// at walks path (map keys, or "0", "1"… into lists) and returns what is there, or nil.
func at(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case object:
			v = x[p]
		case []any:
			i := int(p[0] - '0')
			if len(p) != 1 || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := at(v, path...).(string)
	return s
}

// flag returns the value after name in args.
func flag(args []string, name string) (string, bool) {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

func TestManifest(t *testing.T) {
	docs := load(t)
	dep := docs["Deployment"]
	pod := at(dep, "spec", "template", "spec")
	podLabels, _ := at(dep, "spec", "template", "metadata", "labels").(object)
	c := at(pod, "containers", "0")
	if c == nil {
		t.Fatal("Deployment has no container")
	}

	var args []string
	for _, a := range at(c, "args").([]any) {
		args = append(args, a.(string))
	}
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("args %q do not start with run", args)
	}
	for name, want := range map[string]string{
		"--lease-table": "esm-leases", "--worker-id": "$(POD_NAME)", "--metrics-addr": "0.0.0.0:9090", "--log-format": "json",
	} {
		if got, ok := flag(args, name); !ok || got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}

	// Without a function esm run exits at once ("no function to invoke"): a crash loop.
	if target, ok := flag(args, "--invoke"); !ok || target == "" {
		t.Error("no --invoke: the workers would exit at start")
	}

	// $(POD_NAME) expands only from a variable of the container: the pod's name.
	var podName bool
	for _, e := range at(c, "env").([]any) {
		if str(e, "name") == "POD_NAME" && str(e, "valueFrom", "fieldRef", "fieldPath") == "metadata.name" {
			podName = true
		}
	}
	if !podName {
		t.Error("no POD_NAME from the downward API (metadata.name)")
	}

	// The template file is the ConfigMap's key, mounted where --template points.
	tmpl, _ := flag(args, "--template")
	var mountPath, volume string
	for _, m := range at(c, "volumeMounts").([]any) {
		if p := str(m, "mountPath"); strings.HasPrefix(tmpl, p+"/") {
			mountPath, volume = p, str(m, "name")
		}
	}
	var configMap string
	for _, v := range at(pod, "volumes").([]any) {
		if str(v, "name") == volume {
			configMap = str(v, "configMap", "name")
		}
	}
	cm := docs["ConfigMap"]
	key := strings.TrimPrefix(tmpl, mountPath+"/")
	if configMap == "" || configMap != str(cm, "metadata", "name") {
		t.Fatalf("--template %s is not on a volume of the ConfigMap %s", tmpl, str(cm, "metadata", "name"))
	}
	template := str(cm, "data", key)
	var node yaml.Node // a node: the CloudFormation tags (!Sub) are no YAML types
	if err := yaml.Unmarshal([]byte(template), &node); err != nil || !strings.Contains(template, "Type: Kinesis") {
		t.Errorf("ConfigMap key %s is not a template with a Kinesis event (%v)", key, err)
	}

	// The probes and the scrape annotation reach the port esm listens on.
	addr, _ := flag(args, "--metrics-addr")
	_, port, _ := strings.Cut(addr, ":")
	var portName string
	for _, p := range at(c, "ports").([]any) {
		if n, _ := at(p, "containerPort").(int); n > 0 && port == strconv.Itoa(n) {
			portName = str(p, "name")
		}
	}
	if portName == "" {
		t.Fatalf("no containerPort %s", port)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if str(c, probe, "httpGet", "path") != path || at(c, probe, "httpGet", "port") != portName {
			t.Errorf("%s: %v, want GET %s on port %s", probe, at(c, probe), path, portName)
		}
	}
	if got := str(dep, "spec", "template", "metadata", "annotations", "prometheus.io/port"); got != port {
		t.Errorf("prometheus.io/port %q, want %s", got, port)
	}

	// The kubelet must not kill esm while it drains: grace, then the lease release.
	if g, _ := at(pod, "terminationGracePeriodSeconds").(int); g <= shutdownGrace+releaseTimeout {
		t.Errorf("terminationGracePeriodSeconds %d, want more than %d", g, shutdownGrace+releaseTimeout)
	}
	for _, r := range []string{"cpu", "memory"} {
		if at(c, "resources", "requests", r) == nil {
			t.Errorf("no %s request", r)
		}
	}
	if got := str(pod, "serviceAccountName"); got != str(docs["ServiceAccount"], "metadata", "name") {
		t.Errorf("serviceAccountName %q is not the manifest's ServiceAccount", got)
	}
	if !strings.HasPrefix(str(docs["ServiceAccount"], "metadata", "annotations", "eks.amazonaws.com/role-arn"), "arn:aws:iam::") {
		t.Error("ServiceAccount has no IRSA role annotation")
	}

	// The selectors pick the Deployment's pods.
	for _, s := range []struct{ kind, path string }{
		{"Deployment", "spec.selector.matchLabels"},
		{"Service", "spec.selector"},
		{"PodDisruptionBudget", "spec.selector.matchLabels"},
	} {
		sel, _ := at(docs[s.kind], strings.Split(s.path, ".")...).(object)
		if len(sel) == 0 {
			t.Errorf("%s has no %s", s.kind, s.path)
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("%s selector %s=%v does not match the pod labels %v", s.kind, k, v, podLabels)
			}
		}
	}
	if at(docs["Service"], "spec", "publishNotReadyAddresses") != true {
		t.Error("the metrics Service hides unready workers from scrapers")
	}
}
