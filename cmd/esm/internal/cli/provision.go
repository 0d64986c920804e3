package cli

import (
	"context"
	"errors"

	"github.com/kinesis-esm/esm/runner"
)

// ProvisionStream creates the template's stream on the endpoint (--provision) when it does not
// exist yet, and has Run register the consumer the template declares (runner's
// TemplateMapping.Provision, on m). It only acts on a stream the template declares
// (AWS::Kinesis::Stream) and on an explicit endpoint URL: it is meant for emulators, never for an
// account's real streams.
func (c *Config) ProvisionStream(ctx context.Context, m *runner.Mapping) error {
	if c.Mapping == nil || c.Mapping.Stream.LogicalID == "" {
		return Usage(errors.New("--provision creates the stream a template declares (AWS::Kinesis::Stream); this mapping's stream is not one"))
	}
	if c.EndpointURL == "" {
		return Usage(errors.New("--provision creates streams on emulators only: give --endpoint-url"))
	}
	tm := runner.TemplateMapping{Mapping: *m, Template: c.Mapping}
	created, err := tm.Provision(ctx, c.AWS)
	if err != nil {
		return err
	}
	*m = tm.Mapping
	if created {
		c.Logger.Info("stream created", "stream", m.Source.Stream, "resource", c.Mapping.Stream.LogicalID, "endpoint", c.EndpointURL)
	}
	return nil
}
