// Command bootstrap is the example function as a Lambda custom-runtime binary
// (GOOS=linux, provided.al2023). It is the same handler esm runs in-process.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/kinesis-esm/esm/example"
)

func main() { lambda.Start(example.Handle) }
