// Package runner is esm's composition root: it runs event source mappings on AWS clients it
// builds once. esm run, esm serve, handler/inproc and programs of their own all go through it.
//
//	cfg, err := runner.AWSConfig(ctx, "", "http://127.0.0.1:4568") // or config.LoadDefaultConfig
//	r, err := runner.New(cfg, runner.WithLogger(logger))
//	err = r.Run(ctx, runner.Mapping{
//		Source:   runner.Source{Stream: "orders"},
//		Function: runner.Function{Handler: handle, Name: "orders"},
//		Config:   poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 10},
//	})
//
// New builds the Kinesis client (GetRecords on a lean path), the Kinesis client of the start-up
// calls (more attempts: StartupAttempts) and the DynamoDB clients of lease tables, all from one
// aws.Config: an emulator's endpoint is its BaseEndpoint (AWSConfig sets it). WithKinesis and
// WithDynamoDB put other clients in their place (the in-memory fakes of tests and of the
// simulation).
//
// Template.Mapping turns a SAM or CloudFormation template's mapping (or, without a template, a
// bare stream) into a Mapping as esm run does: the template's stream, consumer, function name,
// timeout, reserved concurrency and settings, its parameters and the emulators' account. A Go
// handler run in this process as the template's function reads the template's environment from
// the process's, which its program sets (this package writes no process environment).
//
// Run checks the settings, finds the stream (and the enhanced fan-out consumer), opens its
// store (a state directory, a lease table, or one Store.Open opens) and runs its poller; with a
// lease table, the lease coordinator too, whose leases are renewed until the poller stopped.
// Supervise runs many mappings (esm serve's), each started again after a failure with a growing
// pause.
//
// # One mapping's configuration, from the flags and from the API to poller.New
//
// The settings are checked in two ways: alone (poller.Config.Validate, fed by the source's
// kind), and as a whole mapping when it starts (poller.New). A Config keeps no mark of a check.
//
// esm run (handler/inproc.Run takes the same path from its typed options, inproc.options.mapping
// in place of the flags):
//
//  1. cli.RunFlags.Load → TemplateFlags.LoadMapping → TemplateFlags.Target → AWSConfig →
//     Template.Mapping (sam.Load, Select, sam.Mapping.PollerConfig, TemplateSource): a Mapping;
//  2. MappingFlags.apply, RunFlags.overrideMapping: the flags given, on the Config;
//  3. cli.Run → Config.mapping (the invoker, or the handler) → Config.trace, Config.observe
//     (Hooks) → Runner.Run;
//  4. Runner.Run → Config.Validate (the settings alone, before any call) → resolve (the
//     stream, the consumer, the function's ARN: Resolve) → the source → openStore (the
//     checkpoint key, Resolved.Key) → runOn → Function.Open → poller.New (the whole mapping).
//
// CreateEventSourceMapping (esm serve):
//
//  1. esmapi.Manager.Create → parseCreate → checkCreate (checkModel, checkKinesis,
//     createRequest.apply on the Config) → Config.Validate (the settings alone, for the answer);
//  2. Runner.Resolve (the source, found once) → Manager.add (the catalog) → startLocked →
//     Manager.mapping (the settings rebuilt from the stored record, as every start) →
//     Supervisor.Start → Runner.Run, which does not look the source up again, and poller.New.
package runner
