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
// Run finds the stream (and the enhanced fan-out consumer), checks the mapping once, opens its
// store (a state directory, a lease table, or one Store.Open opens) and runs its poller; with a
// lease table, the lease coordinator too, whose leases are renewed until the poller stopped.
// Supervise runs many mappings (esm serve's), each started again after a failure with a growing
// pause.
//
// # One mapping's configuration, from the flags and from the API to poller.New
//
// esm run (cmd/esm runCmd.run; handler/inproc.Run takes the same path from its typed options,
// inproc.options.mapping in place of the flags, and runs the mapping on its own Runner):
//
//  1. cli.RunFlags.Load → TemplateFlags.LoadMapping → TemplateFlags.Target → AWSConfig →
//     Template.Mapping → Template.Load (sam.Load) → sam.Template.Select →
//     sam.Mapping.PollerConfig, TemplateSource: a Mapping (Source, Function, Config, Store, Hooks);
//  2. MappingFlags.apply, RunFlags.overrideMapping (the flags given, on the Config);
//  3. cli.Run → Config.mapping (the invoker, or the handler) → New →
//     Config.trace, Config.observe (Hooks) → Runner.Run;
//  4. Runner.Run → poller.Config.CheckSettings (Lambda's settings, before any call) →
//     resolve (kinesissrc.ResolveStreamARN, resolveConsumer, the function's ARN) → kinesissrc.ListShards → openStore →
//     runOn → poller.New, which checks the stream's ARNs and not the settings again.
//
// CreateEventSourceMapping (esm serve):
//
//  1. esmapi.Manager.Create → parseCreate → Manager.create → Manager.checkCreate
//     (createRequest.checkModel, checkKinesis, createRequest.apply on the Config) →
//     poller.Config.Check: the one check, which the value keeps;
//  2. Runner.Resolve (the source, found once) → Manager.add (the catalog) →
//     Manager.startLocked → Manager.mapping (the checked value) → Supervisor.Start →
//     Runner.Run → CheckSettings and poller.New, which find the value checked and check nothing
//     again.
//
// A mapping read back from the catalog (a restart, another worker's change) is checked once, by
// Runner.Run.
package runner
