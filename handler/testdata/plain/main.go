// Command plain is the example function with plain lambda.Start: the baseline of the size test
// (TestSlimHandlerSize).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/kinesis-esm/esm/example"
)

func main() { lambda.Start(example.Handle) }
