package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
)

var kinesisEndpoint, dynamoEndpoint string

func TestMain(m *testing.M) {
	ctx := context.Background()
	var stopK, stopD func()
	var err error
	if kinesisEndpoint, stopK, err = testenv.KinesisEndpoint(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if dynamoEndpoint, stopD, err = testenv.DynamoEndpoint(ctx); err != nil {
		stopK()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopD()
	stopK()
	os.Exit(code)
}

// Settings of "make chaos"; unset, the test runs one short seed.
const (
	envSeeds    = "ESM_CHAOS_SEEDS"    // how many seeds (default 1)
	envFrom     = "ESM_CHAOS_FROM"     // the first seed (default 1)
	envDuration = "ESM_CHAOS_DURATION" // load and faults per seed (default 25s; a DynamoDB stream's 15s)
	envWorkers  = "ESM_CHAOS_WORKERS"  // esm processes (default 3)
	envFlags    = "ESM_CHAOS_FLAGS"    // more "esm run" flags for every worker
	envLogs     = "ESM_CHAOS_LOGS"     // a directory to keep the workers' logs in
	// envSource is the stream: "kinesis" or "dynamodb" (a table's stream on a private ddb-local
	// whose shards rotate every ddbRotate). Unset, the test runs one seed of each.
	envSource = "ESM_CHAOS_SOURCE"
)

// ddbRotate is the shard rotation period of the DynamoDB run's ddb-local: several rotations in
// the shortest load.
const ddbRotate = 3 * time.Second

// ddbShort is the load of the DynamoDB seed "go test" runs with no settings (five rotations of
// each of its two shards), shorter than the Kinesis seed's so that it costs well under a minute.
const ddbShort = 15 * time.Second

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestChaos runs esm workers as processes under faults and judges every invariant; see the
// package documentation and "make chaos".
func TestChaos(t *testing.T) {
	seeds, from := envInt(t, envSeeds, 1), envInt(t, envFrom, 1)
	workers := envInt(t, envWorkers, 3)
	duration, short := 25*time.Second, ddbShort
	if v := os.Getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("%s=%q: want a duration of at least 10s", envDuration, v)
		}
		duration, short = d, d
	}
	sources := []Source{SourceKinesis, SourceDynamoDB}
	if v := os.Getenv(envSource); v != "" {
		src, err := ParseSource(v)
		if err != nil {
			t.Fatalf("%s: %v", envSource, err)
		}
		sources = []Source{src}
	}
	ctx := t.Context()
	bin, err := testenv.BuildESM(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(envLogs)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range sources {
		cfg := Config{Source: src, Duration: duration, Workers: workers, ESM: bin,
			KinesisEndpoint: kinesisEndpoint, DynamoEndpoint: dynamoEndpoint, Dir: dir,
			Flags: strings.Fields(os.Getenv(envFlags)), Logf: t.Logf}
		if src == SourceDynamoDB {
			endpoint, stop, err := testenv.DDBStreamsEndpoint(ctx, "", local.DDBLocalOptions{Rotate: ddbRotate, Shards: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			cfg.DDBStreamsEndpoint, cfg.Rotate, cfg.Duration = endpoint, ddbRotate, short
		}
		runSeeds(t, cfg, from, seeds, dir)
	}
}

// runSeeds runs seeds seeds of cfg from from, reports each and their summary, and fails the test
// for each seed that broke an invariant.
func runSeeds(t *testing.T, cfg Config, from, seeds int, dir string) {
	t.Helper()
	sum := Summary{Source: cfg.Source}
	for seed := from; seed < from+seeds; seed++ {
		cfg.Seed = uint64(seed)
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatalf("%s seed %d: %v", cfg.Source, seed, err)
		}
		var b strings.Builder
		res.Report(&b)
		t.Log("\n" + b.String())
		sum.Add(res)
		if !res.OK() {
			t.Errorf("%s seed %d: an invariant broke (logs in %s)", cfg.Source, seed, dir)
			for _, w := range res.Workers {
				t.Logf("%s, last lines of its log:\n%s", w.ID, w.LogTail(30))
			}
		}
	}
	var b strings.Builder
	sum.Report(&b)
	t.Log("\n" + b.String())
}
