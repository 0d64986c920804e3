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
// New builds the clients every mapping shares, all from one aws.Config: Kinesis' (GetRecords on a
// lean path unless WithSDKGetRecords), DynamoDB Streams', the lease tables' DynamoDB client, and
// for each of them a client of the start-up calls (more attempts: StartupAttempts). An
// emulator's endpoint is the aws.Config's BaseEndpoint (AWSConfig sets it). WithKinesis,
// WithDynamoDB and WithDynamoDBStreams put other clients in their place (the in-memory fakes of
// tests and of the simulation).
//
// Template.Mapping turns a SAM or CloudFormation template's mapping (or, without a template, a
// bare stream) into a Mapping as esm run does: the template's stream, consumer, function name,
// timeout, reserved concurrency and settings, its parameters and the emulators' account. A Go
// handler run in this process as the template's function reads the template's environment from
// the process's, which its program sets (this package writes no process environment).
//
// Run checks the settings, finds the stream (a Kinesis stream, with the enhanced fan-out
// consumer it reads through, or a DynamoDB table's stream), opens its store (a state directory,
// a lease table, or one Store.Open opens) and runs its poller; with a lease table, the lease
// coordinator too, whose leases are renewed until the poller stopped. Supervise runs many
// mappings (esm serve's), each started again after a failure with a growing pause.
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
// esm run, from its flags to poller.New (handler/inproc.Run takes the same path from its typed
// options in place of the flags):
//
//  1. cli.RunFlags.Load → TemplateFlags.Target → Template.Mapping (the template's mapping:
//     sam.Load, Select, PollerConfig, TemplateSource; its function's name, ARN, timeout and
//     role), back to Target (the run's configuration around it) and to Load → RunFlags.apply
//     (every flag given, over it, in one place);
//  2. back in the command → cli.RunUntilCaughtUp → cli.Run (Config.function: the --invoke
//     targets parsed once, their invoker or the handler run in this process; runner.New;
//     Config.trace and Config.observe: the Hooks) → Runner.Run;
//  3. Runner.Run (check: the settings alone, before any call; resolve: the stream, the consumer,
//     Function.FunctionARN; Source; exists; openFunction: the invoker, once for every start) →
//     runRewinding (through runLeaseTable for a lease table) → the store opened (openStore, keyed
//     by Resolved.Key, or openLeases) → runOn → poller.New.
//
// CreateEventSourceMapping (esm serve; a template's mappings take the same path from
// esmapi.Manager.EnsureMapping):
//
//  1. esmapi.Manager.Create (parseCreate) → create → checkCreate (the model's constraints, the
//     source, the function and its ARN, the settings: Config.Validate) → a Mapping, back in
//     create → Runner.Resolve (the source, found once), back in create → Manager.add (the record
//     in the catalog);
//  2. startLocked → Manager.mapping (the Mapping again from the record, as every start makes
//     it), back in startLocked → Supervisor.Start → Runner.Run, which does not look the source up
//     again → runRewinding → openStore (Store.Open) → runOn → poller.New.
package runner
