package filter_test

import (
	"errors"
	"fmt"

	"github.com/kinesis-esm/esm/filter"
)

func Example() {
	// The Pattern strings of a mapping's FilterCriteria, compiled once.
	f, err := filter.Compile([]string{
		`{"data": {"order": {"type": ["buy"], "quantity": [{"numeric": [">", 100]}]}}}`,
		`{"data": {"priority": [{"equals-ignore-case": "high"}]}}`,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, data := range []string{
		`{"order": {"type": "buy", "quantity": 1000}}`,
		`{"order": {"type": "sell", "quantity": 1000}}`,
		`{"priority": "HIGH"}`,
		`plain text`,
	} {
		fmt.Println(f.Match(filter.Record{Data: []byte(data), PartitionKey: "k"}), data)
	}
	// Output:
	// true {"order": {"type": "buy", "quantity": 1000}}
	// false {"order": {"type": "sell", "quantity": 1000}}
	// true {"priority": "HIGH"}
	// false plain text
}

func ExampleCompile_invalid() {
	_, err := filter.Compile([]string{`{"data": {"quantity": [{"numeric": [">", 5, "<", 1]}]}}`})
	fmt.Println(err)
	fmt.Println(errors.Is(err, filter.ErrInvalidPattern))
	var pe *filter.PatternError
	if errors.As(err, &pe) {
		fmt.Println(pe.Detail())
	}
	// Output:
	// Invalid filter pattern definition.
	// true
	// filter 0 at data.quantity: numeric: the lower bound must be less than the upper bound
}
