package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kinesis-esm/esm/internal/cli"
	"github.com/kinesis-esm/esm/sam"
)

type validateCmd struct {
	cli.TemplateFlags `embed:""`
	JSON              bool `help:"Print the resolved mappings as JSON." env:"ESM_JSON"`
}

// run checks the template and prints every Kinesis mapping it declares (only the one --function
// selects, when given). It makes no AWS call: AWS::AccountId is 000000000000 with an endpoint URL
// and sam local's 123456789012 otherwise, unless overridden.
func (v *validateCmd) run(ctx context.Context, e env) error {
	res, err := v.Resolve(ctx, false)
	if err != nil {
		return err
	}
	if res.Template == nil {
		return cli.Usage(fmt.Errorf("no %s here: pass --template FILE", cmp.Or(v.Template, cli.DefaultTemplate)))
	}
	t := res.Template
	if v.Function != "" || len(t.Mappings) == 0 {
		m, err := t.Select(v.Function)
		if err != nil {
			if len(t.Warnings) > 0 {
				return fmt.Errorf("%w (%s)", err, strings.Join(t.Warnings, "; "))
			}
			return err
		}
		t.Mappings = []sam.Mapping{*m}
	}
	if v.JSON {
		return t.WriteJSON(e.stdout)
	}
	return printMappings(e.stdout, t)
}

func printMappings(w io.Writer, t *sam.Template) error {
	var b strings.Builder
	n := len(t.Mappings)
	fmt.Fprintf(&b, "%s: valid, %d Kinesis mapping%s\n", t.File, n, map[bool]string{true: "", false: "s"}[n == 1])
	for _, m := range t.Mappings {
		f := m.Function
		fmt.Fprintf(&b, "\n%s (%s)\n", m.ID, m.Source)
		fmt.Fprintf(&b, "  function     %s  timeout %ds, memory %d MB", f.FunctionArn, f.Timeout, f.MemorySize)
		if f.ReservedConcurrentExecutions != nil {
			fmt.Fprintf(&b, ", reserved concurrency %d", *f.ReservedConcurrentExecutions)
		}
		b.WriteString("\n")
		if f.Role != "" {
			fmt.Fprintf(&b, "  role         %s\n", f.Role)
		}
		if f.Runtime != "" || f.CodeUri != "" {
			fmt.Fprintf(&b, "  code         %s %s %s %s\n", f.Runtime, f.Handler, strings.Join(f.Architectures, ","), f.CodeUri)
		}
		fmt.Fprintf(&b, "  stream       %s", m.EventSourceArn)
		if m.Stream.LogicalID != "" {
			fmt.Fprintf(&b, "  (resource %s", m.Stream.LogicalID)
			if m.Stream.ShardCount > 0 {
				fmt.Fprintf(&b, ", %d shards", m.Stream.ShardCount)
			}
			if m.Stream.StreamMode != "" {
				fmt.Fprintf(&b, ", %s", m.Stream.StreamMode)
			}
			b.WriteString(")")
		}
		b.WriteString("\n")
		start := m.StartingPosition
		if m.StartingPositionTimestamp != nil {
			start += " " + m.StartingPositionTimestamp.Format("2006-01-02T15:04:05.999Z07:00")
		}
		fmt.Fprintf(&b, "  start        %s\n", start)
		fmt.Fprintf(&b, "  batches      up to %d records, window %ds, parallelization %d", m.BatchSize, m.MaximumBatchingWindowInSeconds, m.ParallelizationFactor)
		if m.TumblingWindowInSeconds > 0 {
			fmt.Fprintf(&b, ", tumbling window %ds", m.TumblingWindowInSeconds)
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "  on failure   retries %s, record age %s, bisect %s", limit(m.MaximumRetryAttempts), limit(m.MaximumRecordAgeInSeconds), onOff(m.BisectBatchOnFunctionError))
		if len(m.FunctionResponseTypes) > 0 {
			fmt.Fprintf(&b, ", %s", strings.Join(m.FunctionResponseTypes, ","))
		}
		b.WriteString("\n")
		if d := m.DestinationConfig.OnFailure; d.Destination != "" {
			fmt.Fprintf(&b, "  destination  %s %s", d.Type, d.Destination)
			if d.QueueUrl != "" {
				fmt.Fprintf(&b, " (%s)", d.QueueUrl)
			}
			b.WriteString("\n")
		}
		if m.FilterCriteria != nil {
			for i, fl := range m.FilterCriteria.Filters {
				label := "filters"
				if i > 0 {
					label = ""
				}
				fmt.Fprintf(&b, "  %-12s %s\n", label, fl.Pattern)
			}
		}
		if m.KMSKeyArn != "" {
			fmt.Fprintf(&b, "  kms key      %s\n", m.KMSKeyArn)
		}
		if m.MetricsConfig != nil {
			fmt.Fprintf(&b, "  metrics      %s\n", strings.Join(m.MetricsConfig.Metrics, ","))
		}
		fmt.Fprintf(&b, "  enabled      %s\n", map[bool]string{true: "yes", false: "no (the mapping polls nothing)"}[m.Enabled])
	}
	for _, w := range t.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s\n", w)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
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
