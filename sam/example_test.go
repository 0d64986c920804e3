package sam_test

import (
	"fmt"

	"github.com/kinesis-esm/esm/sam"
)

// Load resolves the template's Kinesis mappings with Lambda's defaults applied; Select picks one,
// and PollerConfig hands it to the poller.
func ExampleLoad() {
	tpl, err := sam.Load("testdata/orders.yaml", sam.WithParameterOverrides(map[string]string{"Stage": "prod"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range tpl.Mappings {
		fmt.Println(m.ID, m.Stream.Name, m.StartingPosition, m.BatchSize)
	}
	m, err := tpl.Select("OrdersFunction/Orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	c := m.PollerConfig()
	fmt.Println(m.EventSourceArn, m.Function.FunctionArn, c.ReportBatchItemFailures)

	_, err = tpl.Select("Nope")
	fmt.Println(err)
	// Output:
	// OrdersFunction/Audit audit AT_TIMESTAMP 100
	// OrdersFunction/Orders orders-prod TRIM_HORIZON 50
	// PaymentsFunction/Payments PaymentsStream LATEST 500
	// arn:aws:kinesis:us-east-1:123456789012:stream/orders-prod arn:aws:lambda:us-east-1:123456789012:function:orders-prod true
	// testdata/orders.yaml: the selector "Nope" matches no Kinesis mapping; the template has: OrdersFunction/Audit, OrdersFunction/Orders, PaymentsFunction/Payments
}

// A caller with other names for its inputs (a command's flags) gives them in InputNames, and the
// messages that say what to change use them.
func ExampleWithInputNames() {
	tpl, err := sam.Load("testdata/orders.yaml", sam.WithInputNames(map[sam.Input]string{sam.InputSelector: "--function"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = tpl.Select("Nope")
	fmt.Println(err)
	// Output:
	// testdata/orders.yaml: --function "Nope" matches no Kinesis mapping; the template has: OrdersFunction/Audit, OrdersFunction/Orders, PaymentsFunction/Payments
}
