// Package local holds local development helpers: starting emulators,
// provisioning, producing records.
//
// The emulators are the npm packages pinned in the repository's package.json
// (kinesis-local for Kinesis, dynalite for DynamoDB). [StartKinesis] and
// [StartDynalite] run them as child processes bound to 127.0.0.1 only; they
// need Node.js on PATH and "npm ci" run in the repository root.
// scripts/emulators.sh starts the same emulators, with the same settings, for
// "make test" and exports their endpoints; [TestKinesisEndpoint] and
// [TestDynamoEndpoint] use those endpoints when they are set and start private
// emulators otherwise, so a TestMain works both under make and under a bare
// "go test".
//
// [AWSConfig], [NewKinesisClient], [CreateStream], [WaitActive] and
// [PutRecords] talk to an emulator with the AWS SDK. They are meant for tests
// and demos, never for real AWS: the credentials are fixed placeholders.
//
// The package runs on Linux and other Unix systems.
package local
