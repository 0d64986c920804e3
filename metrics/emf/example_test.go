package emf_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/kinesis-esm/esm/metrics/emf"
)

// An interval's measurements become one CloudWatch embedded-metric-format line, with Lambda's
// metric names under the FunctionName dimension.
func Example() {
	var out bytes.Buffer
	obs := emf.New(&out, "ESM", "my-function", "orders")
	obs.BatchInvoked("shardId-000000000000", 3, 40*time.Millisecond, false)
	obs.FunctionError("shardId-000000000000")
	if err := obs.Flush(); err != nil { // Run flushes every interval
		log.Fatal(err)
	}

	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		log.Fatal(err)
	}
	fmt.Println("FunctionName", doc["FunctionName"], "StreamName", doc["StreamName"])
	fmt.Println("Invocations", doc["Invocations"], "Errors", doc["Errors"], "Duration", doc["Duration"])
	// Output:
	// FunctionName my-function StreamName orders
	// Invocations 1 Errors 1 Duration [40]
}
