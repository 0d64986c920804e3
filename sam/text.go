package sam

import (
	"fmt"
	"io"
	"strings"

	"github.com/kinesis-esm/esm/source/dynamostreams"
)

// WriteText writes the template's mappings for a reader (what esm validate prints): the file and
// the number of mappings, then each mapping's function, stream, batching, failure handling and
// destination, then the template's warnings.
func (t *Template) WriteText(w io.Writer) error {
	var b strings.Builder
	n := len(t.Mappings)
	fmt.Fprintf(&b, "%s: valid, %d %s mapping%s\n", t.File, n, t.kinds(), map[bool]string{true: "", false: "s"}[n == 1])
	for i := range t.Mappings {
		t.Mappings[i].writeText(&b)
	}
	for _, w := range t.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s\n", w)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// kinds names the kind of stream the mappings read: Kinesis, DynamoDB, or stream when both.
func (t *Template) kinds() string {
	ddb := 0
	for i := range t.Mappings {
		if dynamostreams.IsStreamARN(t.Mappings[i].EventSourceArn) {
			ddb++
		}
	}
	switch ddb {
	case 0:
		return "Kinesis"
	case len(t.Mappings):
		return "DynamoDB"
	}
	return "stream"
}

func (m *Mapping) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "\n%s (%s)\n", m.ID, m.Source)
	m.Function.writeText(b)
	fmt.Fprintf(b, "  stream       %s", m.EventSourceArn)
	if m.Stream.LogicalID != "" {
		fmt.Fprintf(b, "  (resource %s", m.Stream.LogicalID)
		if m.Stream.ShardCount > 0 {
			fmt.Fprintf(b, ", %d shards", m.Stream.ShardCount)
		}
		if m.Stream.StreamMode != "" {
			fmt.Fprintf(b, ", %s", m.Stream.StreamMode)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	start := m.StartingPosition
	if m.StartingPositionTimestamp != nil {
		start += " " + m.StartingPositionTimestamp.Format("2006-01-02T15:04:05.999Z07:00")
	}
	fmt.Fprintf(b, "  start        %s\n", start)
	fmt.Fprintf(b, "  batches      up to %d records, window %ds, parallelization %d", m.BatchSize, m.MaximumBatchingWindowInSeconds, m.ParallelizationFactor)
	if m.TumblingWindowInSeconds > 0 {
		fmt.Fprintf(b, ", tumbling window %ds", m.TumblingWindowInSeconds)
	}
	b.WriteString("\n")
	m.writeFailureText(b)
	if m.FilterCriteria != nil {
		for i, fl := range m.FilterCriteria.Filters {
			label := "filters"
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(b, "  %-12s %s\n", label, fl.Pattern)
		}
	}
	if m.KMSKeyArn != "" {
		fmt.Fprintf(b, "  kms key      %s\n", m.KMSKeyArn)
	}
	if m.MetricsConfig != nil {
		fmt.Fprintf(b, "  metrics      %s\n", strings.Join(m.MetricsConfig.Metrics, ","))
	}
	fmt.Fprintf(b, "  enabled      %s\n", map[bool]string{true: "yes", false: "no (the mapping polls nothing)"}[m.Enabled])
}

func (f *Function) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "  function     %s  timeout %ds, memory %d MB", f.FunctionArn, f.Timeout, f.MemorySize)
	if f.ReservedConcurrentExecutions != nil {
		fmt.Fprintf(b, ", reserved concurrency %d", *f.ReservedConcurrentExecutions)
	}
	b.WriteString("\n")
	if f.Role != "" {
		fmt.Fprintf(b, "  role         %s\n", f.Role)
	}
	if f.Runtime != "" || f.CodeUri != "" {
		fmt.Fprintf(b, "  code         %s %s %s %s\n", f.Runtime, f.Handler, strings.Join(f.Architectures, ","), f.CodeUri)
	}
}

// writeFailureText writes how failures are handled: retries, record age, bisection, partial
// batch responses and the on-failure destination.
func (m *Mapping) writeFailureText(b *strings.Builder) {
	fmt.Fprintf(b, "  on failure   retries %s, record age %s, bisect %s", limit(m.MaximumRetryAttempts), limit(m.MaximumRecordAgeInSeconds), onOff(m.BisectBatchOnFunctionError))
	if len(m.FunctionResponseTypes) > 0 {
		fmt.Fprintf(b, ", %s", strings.Join(m.FunctionResponseTypes, ","))
	}
	b.WriteString("\n")
	if d := m.DestinationConfig.OnFailure; d.Destination != "" {
		fmt.Fprintf(b, "  destination  %s %s", d.Type, d.Destination)
		if d.QueueUrl != "" {
			fmt.Fprintf(b, " (%s)", d.QueueUrl)
		}
		b.WriteString("\n")
	}
}

func limit(v int) string {
	if v == -1 {
		return "unlimited"
	}
	return fmt.Sprint(v)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
