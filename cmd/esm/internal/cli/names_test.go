package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/sam"
)

// TestTemplateMessagesNameTheFlags: the template library names the caller's inputs by their Go
// names; the command's messages name its flags instead, word for word as before.
func TestTemplateMessagesNameTheFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	f := TemplateFlags{Template: path, AWSFlags: AWSFlags{EndpointURL: "http://127.0.0.1:1"}, ParameterOverrides: []string{"Nope=1"}}
	_, err := f.Resolve(context.Background(), false)
	want := path + ": --parameter-overrides: Parameters: [Nope] do not exist in the template"
	if err == nil || err.Error() != want {
		t.Fatalf("unknown override: %v; want %s", err, want)
	}

	f.ParameterOverrides = nil
	f.Function = "Other"
	_, err = f.Target(context.Background(), nil, nil, nil)
	var se *sam.SelectionError
	want = path + `: --function "Other" matches no Kinesis mapping; the template has: Fn/K`
	if !errors.As(err, &se) || err.Error() != want {
		t.Fatalf("unknown selector: %v; want %s", err, want)
	}
}

func TestStateDirInUse(t *testing.T) {
	held := fmt.Errorf("%w: .esm (held by pid 7)", checkpoint.ErrLocked)
	got := StateDirInUse(held)
	if !errors.Is(got, checkpoint.ErrLocked) || got.Error() != "state directory in use by another process: .esm (held by pid 7); stop that process or pass a different --state-dir" {
		t.Fatalf("StateDirInUse = %v", got)
	}
	if other := errors.New("disk full"); StateDirInUse(other) != other {
		t.Fatal("StateDirInUse changed an error that is not checkpoint.ErrLocked")
	}
}
