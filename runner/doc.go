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
// # From the flags, the template and the API to poller.New
//
// A Mapping is one value: its source, its function (Function.ARN is the function's identity:
// what it is invoked as, what keys its checkpoints, what esm serve's API reports), Lambda's
// settings (Config), its store and its hooks. Each entry point builds it once, and Run makes the
// rest once: the source found, the function's invoker, the checkpoint key.
//
// The settings are checked in two ways: alone (poller.Config.Validate, fed by the source's kind:
// esm validate, the API's answer, and Run before any call), and as a whole mapping when it
// starts (poller.New). A Config keeps no mark of a check.
//
// esm run (handler/inproc.Run takes the same path from its typed options in place of the flags):
//
//  1. cli.RunFlags.Load → TemplateFlags.Target → Template.Mapping (the template's mapping: sam.Load,
//     Select, PollerConfig, TemplateSource; its function's name, ARN, timeout and role) →
//     RunFlags.apply (every flag given, over it, in one place);
//  2. cli.Run → Config.function (the --invoke targets parsed once: their invoker, or the handler
//     run in this process) → Config.trace, Config.observe (the Hooks) → Runner.Run;
//  3. Runner.Run → check (the settings alone, before any call) → resolve (the stream, the
//     consumer, Function.FunctionARN) → Source (the stream's reader) → openFunction (the invoker,
//     once for every start) → runRewinding → openStore (Resolved.Key) → runOn → poller.New.
//
// CreateEventSourceMapping (esm serve; a template's mappings take the same path from
// esmapi.Manager.EnsureMapping):
//
//  1. esmapi.Manager.Create → parseCreate → checkCreate (the model's constraints, the source, the
//     function and its ARN, the settings: Config.Validate) → a Mapping;
//  2. Runner.Resolve (the source, found once) → Manager.add (the record in the catalog) →
//     startLocked → Manager.mapping (the settings as the record keeps them, as every start) →
//     Supervisor.Start → Runner.Run, which does not look the source up again, and poller.New.
package runner
