package local

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
)

// Defaults used by the emulators, by scripts/emulators.sh and by [AWSConfig].
const (
	// DefaultRegion is the region of emulated resources and their ARNs.
	DefaultRegion = "us-east-1"
	// DefaultAccountID is the account in the ARNs kinesis-local returns.
	DefaultAccountID = "000000000000"
)

// kinesisTransitionDuration is how long kinesis-local keeps a stream or
// consumer in a transitional state (CREATING, UPDATING, ...). Its own default,
// 500ms, slows every test that creates or reshards a stream.
const kinesisTransitionDuration = "100ms"

// dynaliteTableMs is how long dynalite keeps a table CREATING, DELETING or
// UPDATING, in milliseconds.
const dynaliteTableMs = "50"

// KinesisOptions configures [StartKinesis]. The zero value is ready to use.
type KinesisOptions struct {
	// RepoDir is where the search for node_modules/kinesis-local starts; it
	// goes up from there to the filesystem root. Default: the working
	// directory.
	RepoDir string
	// Port is the plain HTTP port on 127.0.0.1. Default: a free port.
	Port int
	// TLSPort is the HTTPS (HTTP/2) port on 127.0.0.1, with kinesis-local's
	// self-signed certificate. Default: a free port.
	TLSPort int
	// Region is the region in the ARNs the emulator returns.
	// Default: DefaultRegion.
	Region string
	// AccountID is the account in the ARNs the emulator returns.
	// Default: DefaultAccountID.
	AccountID string
	// Env holds extra KEY=value settings for kinesis-local, such as
	// "INITIALIZE_STREAMS=name:2" or "LOG_LEVEL=INFO". They override the
	// package's settings.
	Env []string
	// LogWriter receives the emulator's stdout and stderr. Its errors are
	// ignored. Default: discarded (the last few KiB still appear in start
	// errors).
	LogWriter io.Writer
	// Node is the node executable. Default: "node" from PATH.
	Node string
}

// DynaliteOptions configures [StartDynalite]. The zero value is ready to use.
type DynaliteOptions struct {
	// RepoDir is where the search for node_modules/dynalite starts; it goes
	// up from there to the filesystem root. Default: the working directory.
	RepoDir string
	// Port is the HTTP port on 127.0.0.1. Default: a free port.
	Port int
	// LogWriter receives the emulator's stdout and stderr. Its errors are
	// ignored. Default: discarded (the last few KiB still appear in start
	// errors).
	LogWriter io.Writer
	// Node is the node executable. Default: "node" from PATH.
	Node string
}

// StartKinesis starts kinesis-local (the npm package pinned in package.json)
// on 127.0.0.1 and blocks until its plain port accepts connections. ctx, and
// a 30 s limit, bound only the start: the emulator runs until
// [Process.Stop]. Streams and consumers leave their transitional states after
// 100ms, and up to 10000 shards are allowed.
//
// The error wraps [ErrNotInstalled] when node_modules/kinesis-local is
// missing. With automatically chosen ports, a start that loses a race for a
// port is retried with new ports.
func StartKinesis(ctx context.Context, opts KinesisOptions) (*Process, error) {
	inst, node, nodeOpts, err := prepareNode(opts.RepoDir, opts.Node, "kinesis-local", "kinesis-local/main.js")
	if err != nil {
		return nil, err
	}
	region := cmp.Or(opts.Region, DefaultRegion)
	account := cmp.Or(opts.AccountID, DefaultAccountID)

	for attempt := 1; ; attempt++ {
		port, tlsPort := opts.Port, opts.TLSPort
		if port == 0 || tlsPort == 0 {
			free, err := freePorts(2)
			if err != nil {
				return nil, err
			}
			if port == 0 {
				port = free[0]
			}
			if tlsPort == 0 {
				tlsPort = free[1]
			}
		}
		env := []string{
			"KINESIS_MOCK_PLAIN_PORT=" + strconv.Itoa(port),
			"KINESIS_MOCK_TLS_PORT=" + strconv.Itoa(tlsPort),
			// kinesis-local does not start at all without its certificate.
			"KINESIS_MOCK_CERT_PATH=" + filepath.Join(filepath.Dir(inst.script), "server.json"),
			"NODE_OPTIONS=" + nodeOpts,
			"AWS_REGION=" + region,
			"AWS_ACCOUNT_ID=" + account,
			"SHARD_LIMIT=10000",
		}
		for _, name := range []string{
			"CREATE_STREAM_DURATION",
			"DELETE_STREAM_DURATION",
			"SPLIT_SHARD_DURATION",
			"MERGE_SHARDS_DURATION",
			"UPDATE_SHARD_COUNT_DURATION",
			"UPDATE_STREAM_MODE_DURATION",
			"REGISTER_STREAM_CONSUMER_DURATION",
			"DEREGISTER_STREAM_CONSUMER_DURATION",
			"START_STREAM_ENCRYPTION_DURATION",
			"STOP_STREAM_ENCRYPTION_DURATION",
		} {
			env = append(env, name+"="+kinesisTransitionDuration)
		}
		env = append(env, opts.Env...)

		p, err := launch(ctx, launchSpec{
			name: "kinesis-local",
			node: node,
			dir:  inst.root,
			args: []string{inst.script},
			env:  env,
			port: port,
			also: []int{tlsPort},
			log:  opts.LogWriter,
		})
		if err == nil {
			p.tlsEndpoint = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
		}
		if err == nil || !retryable(err, attempt, opts.Port == 0 || opts.TLSPort == 0) {
			return p, err
		}
	}
}

// prepareNode finds an npm-installed emulator (module, with its script at rel under
// node_modules), the node binary and the NODE_OPTIONS that load the loopback preload.
func prepareNode(repoDir, nodePath, module, rel string) (inst installation, node, nodeOpts string, err error) {
	if inst, err = findInstallation(repoDir, module, rel); err != nil {
		return inst, "", "", err
	}
	if node, err = nodeBinary(nodePath); err != nil {
		return inst, "", "", err
	}
	nodeOpts, err = nodeOptions(inst.preload)
	return inst, node, nodeOpts, err
}

// StartDynalite starts dynalite (the npm package pinned in package.json) on
// 127.0.0.1 and blocks until its port accepts connections. ctx, and a 30 s
// limit, bound only the start: the emulator runs until [Process.Stop].
// Tables leave CREATING, DELETING and UPDATING after 50ms. Data is kept in
// memory.
//
// The error wraps [ErrNotInstalled] when node_modules/dynalite is missing.
// With an automatically chosen port, a start that loses a race for the port
// is retried with a new one.
func StartDynalite(ctx context.Context, opts DynaliteOptions) (*Process, error) {
	inst, node, nodeOpts, err := prepareNode(opts.RepoDir, opts.Node, "dynalite", "dynalite/cli.js")
	if err != nil {
		return nil, err
	}

	return onePort(opts.Port, func(port int) (*Process, error) {
		return launch(ctx, launchSpec{
			name: "dynalite",
			node: node,
			dir:  inst.root,
			args: []string{
				inst.script,
				"--host", "127.0.0.1",
				"--port", strconv.Itoa(port),
				"--createTableMs", dynaliteTableMs,
				"--deleteTableMs", dynaliteTableMs,
				"--updateTableMs", dynaliteTableMs,
			},
			// --host already binds loopback; the preload is a second guard.
			env:  []string{"NODE_OPTIONS=" + nodeOpts},
			port: port,
			log:  opts.LogWriter,
		})
	})
}

// retryable reports whether a failed start is worth another attempt: only
// when a port was chosen automatically (so a new one can be picked), attempts
// remain, and the start failed the way a lost race for a port makes it fail:
// the port was taken before the emulator started, or the emulator exited.
func retryable(err error, attempt int, autoPort bool) bool {
	var (
		exited *exitedError
		inUse  *portInUseError
	)
	return autoPort && attempt < freePortAttempts && (errors.As(err, &exited) || errors.As(err, &inUse))
}

// onePort starts an emulator that listens on one port: fixed, or else a free one, with a start
// that loses the race for it retried on another (see [retryable]).
func onePort(fixed int, start func(port int) (*Process, error)) (*Process, error) {
	for attempt := 1; ; attempt++ {
		port := fixed
		if port == 0 {
			free, err := freePorts(1)
			if err != nil {
				return nil, err
			}
			port = free[0]
		}
		p, err := start(port)
		if err == nil || !retryable(err, attempt, fixed == 0) {
			return p, err
		}
	}
}
