// Package verify judges a run of the example function from the deliveries it recorded: every
// record delivered, in put order per partition key, and no child shard invoked before its
// parents were drained. For DynamoDB Streams, DDBProducer writes a table's changes (every kind
// of write) and remembers them, and DDBRecords judges the event records delivered: every change,
// in order per key, with the images AWS sends.
package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/example"
)

// ReadDeliveries reads the JSON lines the example function appends to EXAMPLE_OUTPUT, in the
// order they were written. A file that does not exist yet holds no deliveries. A last line
// without its newline is still being written (a reader polling the file can see part of an
// append) and is left for the next read.
func ReadDeliveries(path string) ([]example.Delivery, error) {
	return readLines[example.Delivery](path)
}

// ReadDDBDeliveries is ReadDeliveries for the example's DynamoDB handler.
func ReadDDBDeliveries(path string) ([]example.DDBDelivery, error) {
	return readLines[example.DDBDelivery](path)
}

// readLines reads the complete JSON lines of path, one T each.
func readLines[T any](path string) ([]T, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1] // complete lines only
	var out []T
	for line := range bytes.Lines(b) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		var d T
		if err := json.Unmarshal(line, &d); err != nil {
			return nil, fmt.Errorf("%s: bad line %q: %w", path, line, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Check is one verdict about a run.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Deliveries checks a run whose producer wrote, for each partition key k, records with data
// "k:0", "k:1", … in that order (written[k] of them):
//   - every record was delivered;
//   - per key, first deliveries came in put order;
//   - no invocation of a child shard started before the last invocation of each of its parents
//     had ended (judged on the deliveries' InvokedAt and DoneAt), and when the stream was
//     resharded at least one parent→child pair had deliveries.
func Deliveries(got []example.Delivery, written map[string]int, lineage map[string][]string) []Check {
	total := 0
	for _, n := range written {
		total += n
	}
	seen := map[string]bool{}
	next := map[string]int{}
	order := Check{Name: "order per partition key", OK: true}
	for _, d := range got {
		if seen[d.Data] {
			continue
		}
		seen[d.Data] = true
		if want := fmt.Sprintf("%s:%d", d.PartitionKey, next[d.PartitionKey]); d.Data != want && order.OK {
			order.OK, order.Detail = false, fmt.Sprintf("key %s: %q arrived where %q was due", d.PartitionKey, d.Data, want)
		}
		next[d.PartitionKey]++
	}
	if order.OK {
		order.Detail = fmt.Sprintf("%d keys, first deliveries in put order", len(next))
	}
	all := Check{Name: "every record delivered", OK: len(seen) == total,
		Detail: fmt.Sprintf("%d of %d distinct records (%d deliveries)", len(seen), total, len(got))}
	if all.OK {
		for k, n := range written {
			if next[k] != n {
				all.OK, all.Detail = false, fmt.Sprintf("key %s: %d of %d records", k, next[k], n)
				break
			}
		}
	}

	// Lineage on invocation times: no invocation of a child started before the last invocation
	// of each of its parents had ended. The deliveries file is written at the end of each
	// invocation, so its order alone cannot tell.
	first, last := map[string]int64{}, map[string]int64{}
	for _, d := range got {
		if t, ok := first[d.ShardID]; !ok || d.InvokedAt < t {
			first[d.ShardID] = d.InvokedAt
		}
		last[d.ShardID] = max(last[d.ShardID], d.DoneAt)
	}
	lin := Check{Name: "parents drained before children", OK: true}
	pairs, edges := 0, 0
	for child, parents := range lineage {
		edges += len(parents)
		fc, ok := first[child]
		if !ok {
			continue
		}
		for _, p := range parents {
			lp, ok := last[p]
			if !ok {
				continue
			}
			pairs++
			if (fc == 0 || lp == 0) && lin.OK {
				lin.OK, lin.Detail = false, fmt.Sprintf("deliveries of %s or %s carry no invocation times", child, p)
			}
			if lp > fc && lin.OK {
				lin.OK, lin.Detail = false, fmt.Sprintf("%s invoked at %s, before the last invocation of its parent %s ended at %s (%s later)",
					child, time.Unix(0, fc).UTC().Format(time.StampMicro), p, time.Unix(0, lp).UTC().Format(time.StampMicro), time.Duration(lp-fc))
			}
		}
	}
	switch {
	case lin.OK && edges > 0 && pairs == 0:
		lin.OK, lin.Detail = false, "the stream was resharded but no parent and child both had deliveries: nothing was judged"
	case lin.OK:
		lin.Detail = fmt.Sprintf("%d parent→child pairs checked on invocation start and end times", pairs)
	}
	return []Check{all, order, lin}
}

// Failed joins the failed checks' details, or returns "" when all passed.
func Failed(cs []Check) string {
	var bad []string
	for _, c := range cs {
		if !c.OK {
			bad = append(bad, c.Name+": "+c.Detail)
		}
	}
	return strings.Join(bad, "; ")
}
