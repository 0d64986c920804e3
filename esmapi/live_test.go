package esmapi_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestUpdateFiltersLive: filters set by an update apply to the records read after it, without
// losing the checkpoint; FilterCriteria {} clears them, and the response then omits FilterCriteria
// as AWS's does.
func TestUpdateFiltersLive(t *testing.T) {
	fn := &recorder{}
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": fn})
	name, arn := newStream(t)
	id := s.call(t, "POST", mappings, map[string]any{"FunctionName": "fn", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON"}).body["UUID"].(string)
	enabled := func() bool { return s.call(t, "GET", mappings+id, nil).body["State"] == "Enabled" }
	testkit.WaitFor(t, "Enabled", 20*time.Second, enabled)
	put(t, name, `{"k":"first"}`)
	testkit.WaitFor(t, "the first record", 20*time.Second, fn.has(`{"k":"first"}`))

	u := s.call(t, "PUT", mappings+id, map[string]any{"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": `{"data":{"k":["keep"]}}`}}}})
	if u.status != 202 || u.body["FilterCriteria"] == nil {
		t.Fatalf("update: %d %v", u.status, u.body)
	}
	testkit.WaitFor(t, "Enabled after the update", 20*time.Second, enabled)
	put(t, name, `{"k":"drop"}`, `{"k":"keep"}`, `{"k":"drop"}`, `{"k":"keep","n":2}`)
	testkit.WaitFor(t, "the matching records", 20*time.Second, fn.has(`{"k":"keep"}`, `{"k":"keep","n":2}`))

	c := s.call(t, "PUT", mappings+id, map[string]any{"FilterCriteria": map[string]any{}})
	if _, present := c.body["FilterCriteria"]; c.status != 202 || present {
		t.Fatalf("clearing the filters: %d %v", c.status, c.body)
	}
	testkit.WaitFor(t, "Enabled after clearing", 20*time.Second, enabled)
	put(t, name, `{"k":"last"}`)
	testkit.WaitFor(t, "a record after clearing", 20*time.Second, fn.has(`{"k":"last"}`))
	want := []string{`{"k":"first"}`, `{"k":"keep"}`, `{"k":"keep","n":2}`, `{"k":"last"}`}
	if got := fn.records(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}
