package sam

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixedNow is the clock of every test: templates' timestamps are before it.
var fixedNow = func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

// TestGolden resolves real-world-shaped templates and compares every mapping, as JSON, with
// testdata/<name>.golden.json, and as esm validate shows them with testdata/<name>.golden.txt. Run with -update to rewrite them after a deliberate change.
func TestGolden(t *testing.T) {
	tests := []struct {
		name      string
		template  string
		overrides string
		opts      []Option
	}{
		{name: "minimal", template: "minimal.yaml"},
		{name: "dynamodb", template: "dynamodb.yaml", opts: []Option{WithAccountID("111122223333")}},
		{name: "orders", template: "orders.yaml"},
		{
			name: "orders-prod", template: "orders.yaml",
			overrides: `Stage=prod BatchSize=200 OrdersStreamName="orders-v2" ` +
				`ParameterKey=AuditStreamArn,ParameterValue=arn:aws:kinesis:eu-west-1:444455556666:stream/audit AWS::AccountId=999988887777`,
			opts: []Option{WithRegion("eu-west-1"), WithEndpointURL("http://127.0.0.1:4566"), WithStackName("shop-prod")},
		},
		{name: "cloudformation", template: "cloudformation.json", opts: []Option{WithRegion("ap-southeast-2"), WithAccountID("000000000000")}},
		{name: "repo-template", template: "../../template.yaml", opts: []Option{WithAccountID("000000000000"), WithEndpointURL("http://127.0.0.1:14568")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := append(tt.opts, WithClock(fixedNow))
			if tt.overrides != "" {
				po, err := ParseParameterOverrides(tt.overrides)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, WithParameterOverrides(po))
			}
			tpl, err := Load(filepath.Join("testdata", tt.template), opts...)
			if err != nil {
				t.Fatal(err)
			}
			tpl.File = tt.template
			var buf bytes.Buffer
			if err := tpl.WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tt.name+".golden.json"), buf.Bytes())
			buf.Reset()
			if err := tpl.WriteText(&buf); err != nil { // esm validate's view
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tt.name+".golden.txt"), buf.Bytes())
		})
	}
}

// golden compares got with the golden file at path, or with -update rewrites it.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./sam -run TestGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("resolved mappings differ from %s (-update rewrites it):\n%s", path, got)
	}
}

// BenchmarkParse resolves orders.yaml (three mappings, every intrinsic) once per op.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/orders.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("orders.yaml", data, WithClock(fixedNow)); err != nil {
			b.Fatal(err)
		}
	}
}
