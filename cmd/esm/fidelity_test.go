package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fifoTemplate = `Transform: AWS::Serverless-2016-10-31
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: consumer
      Events:
        K:
          Type: Kinesis
          Properties:
            Stream: arn:aws:kinesis:us-east-1:000000000000:stream/orders
            StartingPosition: TRIM_HORIZON
            DestinationConfig:
              OnFailure:
                Destination: arn:aws:sqs:us-east-1:000000000000:failures.fifo
`

// TestFIFODestinationRefused: a FIFO queue can never take Lambda's on-failure message, so both
// "esm validate" and "esm run" refuse the template with a message naming the queue, before
// anything is polled or written.
func TestFIFODestinationRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "template.yaml")
	if err := os.WriteFile(path, []byte(fifoTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	for _, args := range [][]string{
		{"validate", "--template", path},
		{"run", "--template", path, "--endpoint-url", kinesisEndpoint, "--state-dir", state},
	} {
		code, _, stderr := runESMOutput(t, "", args...)
		if code != 2 {
			t.Fatalf("esm %s: exit code %d, want 2; stderr:\n%s", args[0], code, stderr)
		}
		for _, want := range []string{"arn:aws:sqs:us-east-1:000000000000:failures.fifo", "is a FIFO queue", "DestinationConfig"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("esm %s: stderr does not name %q:\n%s", args[0], want, stderr)
			}
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("esm run wrote its state directory (%v) for a template it refused", err)
	}
}
