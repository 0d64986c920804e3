// Package local runs the AWS services esm needs on this machine and talks to them: it starts the
// emulators bound to 127.0.0.1, provisions streams and queues, produces records and reshards.
//
// The emulators are the npm packages pinned in the repository's package.json
// (kinesis-local for Kinesis, dynalite for DynamoDB). [StartKinesis] and
// [StartDynalite] run them as child processes bound to 127.0.0.1 only; they
// need Node.js on PATH and "npm ci" run in the repository root.
// scripts/emulators.sh starts the same emulators, with the same settings, for
// "make test". [StartSQS] runs an SQS emulator in this process and [StartRIE]
// runs aws-lambda-rie (built by "make rie") with a function's bootstrap.
//
// [AWSConfig], [NewKinesisClient], [CreateStream], [WaitActive] and
// [PutRecords] talk to an emulator with the AWS SDK. They are meant for tests
// and demos, never for real AWS: the credentials are fixed placeholders.
//
// The package runs on Linux and other Unix systems.
package local
