package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RIEPackage is the Go package of the Lambda Runtime Interface Emulator, pinned as a tool in
// go.mod ("go get -tool"), so that "go build" of it inside this module builds the pinned version.
const RIEPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// BuildRIE builds the aws-lambda-rie version pinned in go.mod into dir and returns the binary's
// path. It runs "go build" in moduleDir (default: the working directory, which must be inside
// this module); with a warm build cache it takes well under a second, cold about 30 s.
func BuildRIE(ctx context.Context, dir, moduleDir string) (string, error) {
	out := filepath.Join(dir, "aws-lambda-rie")
	if err := goBuild(ctx, moduleDir, out, RIEPackage, nil); err != nil {
		return "", err
	}
	return out, nil
}

// BuildBootstrap builds a Lambda function's main package (pkg, e.g.
// "github.com/kinesis-esm/esm/example/bootstrap") as a custom-runtime bootstrap for
// provided.al2023: CGO_ENABLED=0, -tags lambda.norpc, for goarch ("amd64", "arm64"; empty: this
// machine's) on Linux, written to out. Run it under aws-lambda-rie, or zip it for Lambda.
func BuildBootstrap(ctx context.Context, moduleDir, out, pkg, goarch string) error {
	env := []string{"CGO_ENABLED=0", "GOOS=linux"}
	if goarch != "" {
		env = append(env, "GOARCH="+goarch)
	}
	return goBuild(ctx, moduleDir, out, pkg, env, "-tags", "lambda.norpc", "-trimpath")
}

// goBuild runs "go build -o out [flags] pkg" in dir with env added.
func goBuild(ctx context.Context, dir, out, pkg string, env []string, flags ...string) error {
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// ESMPackage is the esm command.
const ESMPackage = "github.com/kinesis-esm/esm/cmd/esm"

// BuildESM builds the esm binary as "make build" does (no tags, no flags) into dir and returns
// its path. moduleDir is as for [BuildRIE].
func BuildESM(ctx context.Context, dir, moduleDir string) (string, error) {
	out := filepath.Join(dir, "esm")
	if err := goBuild(ctx, moduleDir, out, ESMPackage, nil); err != nil {
		return "", err
	}
	return out, nil
}

// DDBLocalPackage is ddb-local, the local DynamoDB with DynamoDB Streams of the fake module.
const DDBLocalPackage = "github.com/kinesis-esm/esm/fake/cmd/ddb-local"

// BuildDDBLocal builds ddb-local into dir and returns its path. moduleDir is as for [BuildRIE].
func BuildDDBLocal(ctx context.Context, dir, moduleDir string) (string, error) {
	out := filepath.Join(dir, "ddb-local")
	if err := goBuild(ctx, moduleDir, out, DDBLocalPackage, nil); err != nil {
		return "", err
	}
	return out, nil
}
