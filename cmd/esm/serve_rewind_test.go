package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// postRewind posts body to the rewind route of mapping uuid on the esm serve at endpoint
// (loopback: unsigned) and returns the status, the error type and the decoded answer.
func postRewind(t *testing.T, endpoint, uuid, body string) (int, string, map[string]any) {
	t.Helper()
	return postTool(t, endpoint, uuid, "rewind", body)
}

// postTool posts body to esm's operator route tool of mapping uuid (see postRewind).
func postTool(t *testing.T, endpoint, uuid, tool, body string) (int, string, map[string]any) {
	t.Helper()
	resp, err := http.Post(endpoint+"/2015-03-31/event-source-mappings/"+uuid+"/esm/"+tool, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), out
}

// TestServeRewindRoute: esm serve rewinds a running mapping through esm's route, on kinesis-local:
// with --lease-table (dynalite) its worker stops, the mapping's lease table is moved, the worker
// starts again and invokes the rewound records again; on a state directory the mapping applies
// the rewind itself, as esm run there does (its poller stops, the rewind is written into the
// state file, the poller starts again from it). Bad input is refused before anything is asked
// of the workers, InvalidParameterValueException with esm rewind's text, alike in both.
func TestServeRewindRoute(t *testing.T) {
	t.Run("lease table", func(t *testing.T) {
		ddb := dynalite(t)
		table := fmt.Sprintf("serve-rewind-%d-%d", os.Getpid(), streamSeq.Add(1))
		proxy := newLoadBarrier(t, ddb, table, 1)
		testServeRewindRoute(t, "--endpoint-url", proxy.URL, "--lease-table", table, "--worker-id", "w1", "--lease-duration", "3s", "--sync-interval", "200ms")
	})
	t.Run("state directory", func(t *testing.T) {
		testServeRewindRoute(t, "--endpoint-url", kinesisEndpoint, "--state-dir", filepath.Join(t.TempDir(), "state"))
	})
}

func testServeRewindRoute(t *testing.T, stores ...string) {
	stream := newStream(t, 1)
	dir := t.TempDir()
	addr, out := freeAddr(t), filepath.Join(dir, "w1.jsonl")
	p := spawnESM(t, append(stopEnv(), "EXAMPLE_OUTPUT="+out), append(append([]string{"serve", "--api-addr", addr}, stores...),
		"--template", writeTemplate(t, dir, stream), "--function", "Fn=example", "--poll-interval", "100ms")...)
	endpoint := "http://" + addr
	testkit.WaitFor(t, "esm serve to listen", 60*time.Second, func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("esm serve exited: %v\n%s", err, p.stderr.String())
		default:
		}
		return strings.Contains(p.stderr.String(), "esm serve:")
	})
	uuid := listMappings(t, endpoint)[0]["UUID"].(string)
	data := []string{"rw-0", "rw-1", "rw-2", "rw-3", "rw-4"}
	seqs := putSequenced(t, stream, data...)
	testkit.WaitFor(t, "every record delivered", 60*time.Second, func() bool { return len(readDeliveries(t, out)) >= len(data) })

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct{ body, want string }{
		{`{}`, "a rewind needs a time"},
		{`{"ToTimestamp":"` + future + `"}`, "is in the future"},
		{`{"ToTimestamp":"` + past + `","Shards":["shardId-000000000042"]}`, "shard shardId-000000000042 is not a shard of the stream (trimmed, or a typo); its shards: shardId-000000000000"},
		{`{"From":"` + past + `"}`, "a window needs both From and Until"},
		{`{"ToTimestamp":"yesterday"}`, `ToTimestamp "yesterday": give an RFC 3339 time`},
		{`{"SequenceNumbers":{"shardId-000000000000":"` + seqs[0] + `1"}}`, "shard shardId-000000000000 has no record with sequence number " + seqs[0] + "1"},
	} {
		status, typ, ans := postRewind(t, endpoint, uuid, tc.body)
		if msg, _ := ans["message"].(string); status != 400 || typ != "InvalidParameterValueException" || !strings.Contains(msg, tc.want) {
			t.Errorf("rewind %s: %d %s %v; want 400 InvalidParameterValueException saying %q", tc.body, status, typ, ans, tc.want)
		}
	}
	if status, typ, _ := postRewind(t, endpoint, "00000000-0000-0000-0000-000000000000", `{"ToTimestamp":"`+past+`"}`); status != 404 || typ != "ResourceNotFoundException" {
		t.Errorf("rewind of an unknown mapping: %d %s, want 404 ResourceNotFoundException", status, typ)
	}

	status, typ, ans := postRewind(t, endpoint, uuid, `{"SequenceNumbers":{"shardId-000000000000":"`+seqs[1]+`"}}`)
	if status != 200 || ans["Revision"] != 1.0 || !slices.Equal(toStrings(ans["Rewound"]), []string{"shardId-000000000000"}) {
		t.Fatalf("rewind: %d %s %v; want 200, revision 1, shardId-000000000000 rewound\n%s", status, typ, ans, p.stderr.String())
	}
	testkit.WaitFor(t, "the records from the rewind's on delivered again", 60*time.Second, func() bool {
		return len(readDeliveries(t, out)) >= len(data)+len(data)-1
	})
	var got []string
	for _, d := range readDeliveries(t, out) {
		got = append(got, d.Data)
	}
	if want := append(slices.Clone(data), data[1:]...); !slices.Equal(got, want) {
		t.Fatalf("deliveries %v, want %v (the records from the second invoked again, in order)", got, want)
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}
