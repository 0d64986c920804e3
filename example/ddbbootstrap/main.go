// Command ddbbootstrap is the example function for a DynamoDB stream (example.HandleDynamoDB) as
// a Lambda custom-runtime binary (GOOS=linux, provided.al2023), or for esm run --invoke exec:.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/kinesis-esm/esm/example"
)

func main() { lambda.Start(example.HandleDynamoDB) }
