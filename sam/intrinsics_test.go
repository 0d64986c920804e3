package sam

import (
	"reflect"
	"strings"
	"testing"
)

// intrinsicsTemplate gives the expressions of TestIntrinsics a parameter, conditions, a mapping
// and resources to refer to.
const intrinsicsTemplate = `Parameters:
  P: {Type: String, Default: p-value}
  L: {Type: CommaDelimitedList, Default: "a, b"}
Conditions:
  Yes: !Equals [a, a]
  No: !Not [!Condition Yes]
Mappings:
  M: {k1: {k2: v}}
Resources:
  S: {Type: AWS::Kinesis::Stream, Properties: {Name: s}}
  Q: {Type: AWS::SQS::Queue}
  X: {Type: AWS::Foo::Bar}
`

// TestIntrinsics evaluates each intrinsic function of the table, on success and on error.
func TestIntrinsics(t *testing.T) {
	tests := []struct {
		fn, expr string
		want     any    // the value, when err is empty
		err      string // the message's end
	}{
		{"Ref", "!Ref P", "p-value", ""},
		{"Ref", "!Ref L", []any{"a", "b"}, ""},
		{"Ref", "{Ref: AWS::Region}", "us-east-1", ""},
		{"Ref", "!Ref Q", "https://sqs.us-east-1.amazonaws.com/123456789012/Q", ""},
		{"Ref", "!Ref Nope", nil, `no parameter or resource "Nope" in the template (Unresolved resource dependencies [Nope])`},
		{"Fn::GetAtt", "!GetAtt S.Arn", "arn:aws:kinesis:us-east-1:123456789012:stream/s", ""},
		{"Fn::GetAtt", "{Fn::GetAtt: [Q, QueueName]}", "Q", ""},
		{"Fn::GetAtt", "!GetAtt S", nil, `Fn::GetAtt takes "LogicalId.Attribute" or [LogicalId, Attribute]`},
		{"Fn::GetAtt", "!GetAtt X.Arn", nil, "esm cannot resolve attributes of AWS::Foo::Bar resources; use a parameter and WithParameterOverrides instead"},
		{"Fn::Sub", `!Sub "${P}-${AWS::AccountId}-${S.Arn}-${!Literal}"`, "p-value-123456789012-arn:aws:kinesis:us-east-1:123456789012:stream/s-${Literal}", ""},
		{"Fn::Sub", "!Sub ['${X}', {X: !Ref P}]", "p-value", ""},
		{"Fn::Sub", "!Sub ['${X}', x]", nil, "the second argument of Fn::Sub must be a mapping of variables"},
		{"Fn::Sub", "!Sub '${P'", nil, "Fn::Sub: unclosed ${ in the string"},
		{"Fn::Join", "!Join [',', [a, !Ref P]]", "a,p-value", ""},
		{"Fn::Join", "!Join [',', [[a]]]", nil, "Fn::Join can only join strings; item 0 is a list"},
		{"Fn::Join", "!Join [',']", nil, "Fn::Join takes a list of 2 arguments"},
		{"Fn::Select", "!Select [1, [a, b]]", "b", ""},
		{"Fn::Select", "!Select [2, [a, b]]", nil, "Fn::Select index 2 is out of range for a list of 2"},
		{"Fn::Select", "!Select [0, x]", nil, `the second argument of Fn::Select must be a list, not "x"`},
		{"Fn::Split", "!Split [',', 'a,b']", []any{"a", "b"}, ""},
		{"Fn::Split", "!Split ['', 'a,b']", nil, "Fn::Split needs a non-empty delimiter"},
		{"Fn::If", "!If [Yes, a, b]", "a", ""},
		{"Fn::If", "!If [No, a, b]", "b", ""},
		{"Fn::If", "!If [Maybe, a, b]", nil, `condition "Maybe" is not defined in Conditions`},
		{"Fn::Equals", "!Equals [a, !Ref P]", false, ""},
		{"Fn::Equals", "!Equals [[a], [a]]", true, ""},
		{"Fn::And", "!And [!Condition Yes, !Condition No]", false, ""},
		{"Fn::And", "!And [!Condition Yes]", nil, "Fn::And takes a list of 2 to 10 arguments"},
		{"Fn::Or", "!Or [!Condition No, !Condition Yes]", true, ""},
		{"Fn::Or", "!Or [!Condition No, !Ref P]", nil, "Ref is not a condition"},
		{"Fn::Or", "!Or [!Condition No, x]", nil, `a condition must be Fn::Equals, Fn::And, Fn::Or, Fn::Not or Condition, not "x"`},
		{"Fn::Not", "!Not [!Condition No]", true, ""},
		{"Condition", "!Condition No", false, ""},
		{"Fn::FindInMap", "!FindInMap [M, k1, k2]", "v", ""},
		{"Fn::FindInMap", "!FindInMap [M, k1, k3, {DefaultValue: d}]", "d", ""},
		{"Fn::FindInMap", "!FindInMap [M, k1, k3]", nil, "Fn::FindInMap: Mappings has no M.k1.k3"},
		{"Fn::Base64", "!Base64 hi", "aGk=", ""},
		{"Fn::GetAZs", "!GetAZs ''", []any{"us-east-1a", "us-east-1b", "us-east-1c"}, ""},
		{"Fn::ToJsonString", "{Fn::ToJsonString: {a: 1, b: [x, true]}}", `{"a":1,"b":["x",true]}`, ""},
		{"Fn::Length", "!Length [a, b, c]", num("3"), ""},
		{"Fn::Length", "!Length x", nil, `the argument of Fn::Length must be a list, not "x"`},
		{"Fn::ImportValue", "!ImportValue shared", nil, "Fn::ImportValue reads another stack's outputs, which only CloudFormation can resolve; use a parameter and WithParameterOverrides instead"},
		{"Fn::Cidr", "!Cidr [10.0.0.0/16, 2, 8]", nil, "Fn::Cidr cannot be resolved outside CloudFormation"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.fn] = true
		t.Run(tt.fn+" "+tt.expr, func(t *testing.T) {
			doc, err := parse("t.yaml", []byte(intrinsicsTemplate+"Outputs:\n  V: {Value: "+tt.expr+"}\n"))
			if err != nil {
				t.Fatal(err)
			}
			r, err := newResolver("t.yaml", doc, newOptions())
			if err != nil {
				t.Fatal(err)
			}
			expr := doc.get("Outputs").get("V").get("Value")
			if expr.kind != kindFn || expr.fn != tt.fn {
				t.Fatalf("%s parsed as %q, want the function %s", tt.expr, expr.fn, tt.fn)
			}
			got, err := r.resolve(expr, "Outputs.V.Value")
			switch {
			case tt.err != "" && (err == nil || !strings.HasSuffix(err.Error(), tt.err)):
				t.Fatalf("got %v, %v; want an error ending %q", got, err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case tt.err == "" && !reflect.DeepEqual(got, tt.want):
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
	for name := range intrinsics {
		if !covered[name] {
			t.Errorf("intrinsic %s has no case in the table", name)
		}
	}
}
