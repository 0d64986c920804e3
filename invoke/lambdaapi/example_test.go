package lambdaapi_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/kinesis-esm/esm/invoke/lambdaapi"
)

// fakeLambda stands in for an *awslambda.Client (lambda.NewFromConfig): it answers as Lambda
// answers a function that returned an error.
type fakeLambda struct{}

func (fakeLambda) Invoke(_ context.Context, in *awslambda.InvokeInput, _ ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error) {
	fmt.Println("invoke", aws.ToString(in.FunctionName), in.InvocationType)
	return &awslambda.InvokeOutput{StatusCode: 200, ExecutedVersion: aws.String("$LATEST"), FunctionError: aws.String("Unhandled"),
		Payload: []byte(`{"errorMessage":"boom","errorType":"errorString"}`)}, nil
}

// The invoker calls the Invoke API synchronously, as the event source mapping does; a function
// error is a response (it counts as an invocation), not an error.
func ExampleNew() {
	inv := lambdaapi.New(fakeLambda{}, "orders:live")
	resp, err := inv.Invoke(context.Background(), []byte(`{"Records":[]}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, resp.ExecutedVersion, resp.FunctionError, string(resp.Payload))
	// Output:
	// invoke orders:live RequestResponse
	// 200 $LATEST Unhandled {"errorMessage":"boom","errorType":"errorString"}
}
