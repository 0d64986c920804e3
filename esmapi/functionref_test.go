package esmapi

import "testing"

// TestParseFunctionName covers every form Lambda's FunctionName takes: a name, name:qualifier, a
// function ARN with and without a qualifier, and a partial ARN (ACCOUNT:function:NAME), which is
// no ARN.
func TestParseFunctionName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want functionRef
	}{
		{"orders", functionRef{name: "orders"}},
		{"orders:live", functionRef{name: "orders", qualifier: "live"}},
		{"arn:aws:lambda:eu-west-1:123456789012:function:orders",
			functionRef{partition: "aws", region: "eu-west-1", account: "123456789012", name: "orders"}},
		{"arn:aws-cn:lambda:cn-north-1:123456789012:function:orders:7",
			functionRef{partition: "aws-cn", region: "cn-north-1", account: "123456789012", name: "orders", qualifier: "7"}},
		{"123456789012:function:orders", functionRef{account: "123456789012", name: "orders"}},
		{"123456789012:function:orders:$LATEST", functionRef{account: "123456789012", name: "orders", qualifier: "$LATEST"}},
	} {
		if got := parseFunctionName(tc.in); got != tc.want {
			t.Errorf("parseFunctionName(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
