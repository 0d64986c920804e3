// Command slim is the example function with handler.Start: what TestSlimHandlerSize measures
// against plain lambda.Start, and what TestStartOutsideLambdaRunsTheMapping runs locally.
package main

import (
	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/handler"
)

func main() { handler.Start(example.Handle) }
