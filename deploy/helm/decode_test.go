package helm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/kinesis-esm/esm/deploy/internal/promnames"
)

// kinds are the objects the chart renders: their apiVersion and a new Go value of their type
// (Kubernetes' own, and the Prometheus operator's for its custom resources).
var kinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"ServiceAccount":      {"v1", func() any { return new(corev1.ServiceAccount) }},
	"ConfigMap":           {"v1", func() any { return new(corev1.ConfigMap) }},
	"Service":             {"v1", func() any { return new(corev1.Service) }},
	"Deployment":          {"apps/v1", func() any { return new(appsv1.Deployment) }},
	"PodDisruptionBudget": {"policy/v1", func() any { return new(policyv1.PodDisruptionBudget) }},
	"ServiceMonitor":      {"monitoring.coreos.com/v1", func() any { return new(monitoringv1.ServiceMonitor) }},
	"PrometheusRule":      {"monitoring.coreos.com/v1", func() any { return new(monitoringv1.PrometheusRule) }},
}

// decodeStrict renders vals and decodes every object into its Go type, refusing unknown fields,
// by "Kind/name".
func decodeStrict(t *testing.T, vals map[string]any) map[string]any {
	t.Helper()
	out, err := renderFiles(vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objs := map[string]any{}
	for _, doc := range documents([]byte(out)) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // a template that rendered nothing but comments
		}
		k, ok := kinds[head.Kind]
		if !ok || k.apiVersion != head.APIVersion {
			t.Fatalf("%s %s: not a kind this test knows", head.APIVersion, head.Kind)
		}
		obj := k.new()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s/%s does not decode strictly: %v", head.Kind, head.Metadata.Name, err)
		}
		objs[head.Kind+"/"+head.Metadata.Name] = obj
	}
	return objs
}

// TestObjectsDecodeStrictly: every object rendered from each example values file, and from each
// with every optional part on, decodes into its Go type with no unknown field.
func TestObjectsDecodeStrictly(t *testing.T) {
	everything := map[string]any{
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}},
		"env":     map[string]any{"ESM_BLOCKED_AFTER": "2m"}, "extraEnv": []any{map[string]any{"name": "X", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}}},
		"envFrom":          []any{map[string]any{"configMapRef": map[string]any{"name": "esm-env"}}},
		"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		"podAnnotations":   map[string]any{"a": "b"}, "nodeSelector": map[string]any{"kubernetes.io/arch": "arm64"},
		"tolerations":               []any{map[string]any{"key": "k", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity":                  map[string]any{"nodeAffinity": map[string]any{}},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}},
	}
	for name, file := range examples(t) {
		for _, over := range []map[string]any{nil, everything} {
			objs := decodeStrict(t, values(t, file, over))
			want := []string{"ConfigMap/esm-template", "Deployment/esm", "PodDisruptionBudget/esm", "Service/esm-metrics", "ServiceAccount/esm"}
			if over != nil || name == "lambda" {
				want = append(want, "PrometheusRule/esm", "ServiceMonitor/esm")
			}
			if got := slices.Sorted(mapsKeys(objs)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("%s: objects %q, want %q", name, got, want)
			}
		}
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// deployment renders vals and returns the Deployment, decoded strictly.
func deployment(t *testing.T, vals map[string]any) *appsv1.Deployment {
	t.Helper()
	d, ok := decodeStrict(t, vals)["Deployment/esm"].(*appsv1.Deployment)
	if !ok {
		t.Fatal("no Deployment/esm")
	}
	return d
}

// container returns the pod's container called name.
func container(t *testing.T, pod *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

// TestRenderWorkers: the values a deployment sets reach the objects.
func TestRenderWorkers(t *testing.T) {
	d := deployment(t, values(t, examples(t)["lambda"], map[string]any{"replicaCount": 7, "leaseTable": "orders-leases",
		"metrics": map[string]any{"port": 9100}, "extraArgs": []any{"--blocked-after", "2m"},
		"image": map[string]any{"repository": "r.example.com/esm"}, "env": map[string]any{"OTEL_SERVICE_NAME": "orders"},
		"serviceAccount": map[string]any{"create": false, "name": "shared"}, "podAnnotations": map[string]any{"team": "orders"}}))
	if *d.Spec.Replicas != 7 {
		t.Errorf("replicas %d, want 7", *d.Spec.Replicas)
	}
	pod := d.Spec.Template
	c := container(t, &pod.Spec, "esm")
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--invoke lambda:orders-handler", "--lease-table orders-leases --no-create-lease-table",
		"--metrics-addr 0.0.0.0:9100", "--worker-id $(POD_NAME)", "--blocked-after 2m"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %s lack %q", args, want)
		}
	}
	if c.Image != "r.example.com/esm:0.1.0" {
		t.Errorf("image %s, want the chart's appVersion as its tag", c.Image)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "OTEL_SERVICE_NAME" && e.Value == "orders" }) {
		t.Errorf("env %v lacks OTEL_SERVICE_NAME", c.Env)
	}
	if c.Ports[0].ContainerPort != 9100 || c.ReadinessProbe.HTTPGet.Port.StrVal != c.Ports[0].Name {
		t.Errorf("port %v, readiness probe %v", c.Ports, c.ReadinessProbe.HTTPGet)
	}
	if pod.Annotations["prometheus.io/port"] != "9100" || pod.Annotations["team"] != "orders" {
		t.Errorf("pod annotations %v", pod.Annotations)
	}
	if pod.Spec.ServiceAccountName != "shared" {
		t.Errorf("serviceAccountName %s", pod.Spec.ServiceAccountName)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Errorf("%d containers for a function on Lambda", len(pod.Spec.Containers))
	}
}

// TestAlertsNameExposedMetrics: every alert of the PrometheusRule names at least one metric, and
// only metrics esm exposes; the four conditions an operator is paged for are there.
func TestAlertsNameExposedMetrics(t *testing.T) {
	have, err := promnames.Exposed()
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeStrict(t, values(t, examples(t)["lambda"], nil))
	rule, ok := objs["PrometheusRule/esm"].(*monitoringv1.PrometheusRule)
	if !ok {
		t.Fatal("the lambda example renders no PrometheusRule")
	}
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			names := promnames.MetricNames(r.Expr.String())
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", r.Alert, r.Expr.String())
			}
			for _, n := range names {
				if !have[n] {
					t.Errorf("%s: %q names %s, which esm does not expose", r.Alert, r.Expr.String(), n)
				}
			}
			if !strings.Contains(r.Expr.String(), `job="esm-metrics", namespace="esm"`) {
				t.Errorf("%s: %q is not about this release's series", r.Alert, r.Expr.String())
			}
		}
	}
	want := []string{"EsmIteratorAgeHigh", "EsmNoWorkerReading", "EsmOnFailureDeliveriesFailing", "EsmShardBlocked"}
	if slices.Sort(alerts); !slices.Equal(alerts, want) {
		t.Errorf("alerts %q, want %q", alerts, want)
	}
	if got := fmt.Sprint(promnames.MetricNames(`max by (function) (esm_mapping_iterator_age_milliseconds{job="x"}) > 300000`)); got != "[esm_mapping_iterator_age_milliseconds]" {
		t.Errorf("the parser finds %s", got)
	}
}
