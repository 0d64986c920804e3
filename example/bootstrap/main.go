// Command bootstrap is the example function as a Lambda custom-runtime binary
// (GOOS=linux, provided.al2023). It is the same handler esm runs in-process.
//
// EXAMPLE_INIT_FAIL=exit makes it exit during init, before it asks for an invocation: the init
// error of a function that cannot start (tests of the execution environments).
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/kinesis-esm/esm/example"
)

func main() {
	if os.Getenv("EXAMPLE_INIT_FAIL") == "exit" {
		fmt.Fprintln(os.Stderr, "example: EXAMPLE_INIT_FAIL=exit: exiting during init")
		os.Exit(1)
	}
	lambda.Start(example.Handle)
}
