package sam

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// FuzzParse feeds arbitrary bytes to the template loader: it must return a mapping or an error
// wrapping poller.ErrInvalidConfig, never panic, and finish quickly. The seed corpus is
// testdata/fuzz/FuzzParse (real templates and inputs that stress aliases, nesting and intrinsics);
// go test -fuzz FuzzParse ./sam explores from there.
func FuzzParse(f *testing.F) {
	f.Add([]byte(eventTemplate("BatchSize: !If [C, 1, 2]")))
	f.Add([]byte(paramTemplate("Type: CommaDelimitedList\n    Default: a,b")))
	f.Add([]byte(esmTemplate("FilterCriteria: {Filters: [{Pattern: '{}'}]}")))
	f.Fuzz(func(t *testing.T, data []byte) {
		done := make(chan struct{})
		var tpl *Template
		var err error
		go func() {
			defer close(done)
			tpl, err = Parse("fuzz.yaml", data, WithClock(fixedNow), WithParameterOverrides(map[string]string{}))
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Parse did not return within 10 s on %q", data)
		}
		if err != nil {
			if !errors.Is(err, poller.ErrInvalidConfig) {
				t.Fatalf("error does not wrap poller.ErrInvalidConfig: %v", err)
			}
			return
		}
		for _, m := range tpl.Mappings {
			if err := m.PollerConfig().Validate(m.EventSourceArn); err != nil {
				t.Fatalf("mapping %s resolved but poller.Config rejects it: %v", m.ID, err)
			}
		}
		_, _ = tpl.Select("")
		if err := tpl.WriteJSON(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}
