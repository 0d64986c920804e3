package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// writeTemplate writes dir/template.yaml, one function Fn with one Kinesis event S on stream
// from TRIM_HORIZON, and returns its path. props are more lines of the event's Properties, at
// their indentation ("BatchSize: 5").
func writeTemplate(t *testing.T, dir, stream string, props ...string) string {
	t.Helper()
	return writeTemplateOn(t, dir, "", "arn:aws:kinesis:us-east-1:000000000000:stream/"+stream, props...)
}

// writeTemplateOn is writeTemplate with more resources (YAML lines at a resource's indentation)
// and the event's Stream as given (an ARN, or an intrinsic such as !GetAtt S.Arn).
func writeTemplateOn(t *testing.T, dir, resources, streamRef string, props ...string) string {
	t.Helper()
	var extra strings.Builder
	for _, p := range props {
		for line := range strings.SplitSeq(p, "\n") {
			extra.WriteString("            " + line + "\n")
		}
	}
	tmpl := filepath.Join(dir, "template.yaml")
	if err := os.WriteFile(tmpl, []byte(`Transform: AWS::Serverless-2016-10-31
Resources:
`+resources+`  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: provided.al2023
      Handler: bootstrap
      CodeUri: .
      Events:
        S:
          Type: Kinesis
          Properties:
            Stream: `+streamRef+`
            StartingPosition: TRIM_HORIZON
`+extra.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// keepFilter is the FilterCriteria of the metrics tests: only records whose data has keep true.
const keepFilter = `FilterCriteria:
  Filters:
    - Pattern: '{"data":{"keep":[true]}}'`

// putKeepAndPoison puts the 30 records of the metrics tests on stream, in order on one key: a
// third with keep false (filtered out), and record 7 a poison record (EXAMPLE_FAIL_MATCH=poison).
func putKeepAndPoison(t *testing.T, ctx context.Context, stream string) {
	t.Helper()
	var recs []local.Record
	for i := range 30 {
		data := fmt.Sprintf(`{"keep":%t,"n":%d}`, i%3 != 0, i)
		if i == 7 {
			data = `{"keep":true,"poison":true}`
		}
		recs = append(recs, local.Record{PartitionKey: "k", Data: []byte(data)})
	}
	if _, err := local.PutRecords(ctx, kin, stream, recs); err != nil {
		t.Fatal(err)
	}
}
