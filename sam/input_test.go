package sam

import (
	"testing"
)

// TestMessagesNameInputsByDefault: without WithInputNames, the messages that say what to
// change name the inputs by their Go names, and no flag of any command.
func TestMessagesNameInputsByDefault(t *testing.T) {
	tests := []struct {
		name, template, overrides, want string
	}{
		{"region", eventTemplate("Stream: arn:aws:kinesis:eu-west-1:123456789012:stream/s\nStartingPosition: LATEST"), "",
			"t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: stream arn:aws:kinesis:eu-west-1:123456789012:stream/s is in eu-west-1 but the function runs in us-east-1 (AWS::Region, WithRegion): Lambda reads streams of its own region only"},
		{"parameter without a value", paramTemplate("Type: String"), "",
			"t.yaml:16: Resources.Fn.Properties.Events.K.Properties.Stream: Parameters: [P] must have values: give it a Default or pass WithParameterOverrides P=..."},
		{"unknown override", paramTemplate("Type: String"), "Q=1",
			"t.yaml: WithParameterOverrides: Parameters: [Q] do not exist in the template"},
		{"ImportValue", eventTemplate("Stream: !ImportValue shared\nStartingPosition: LATEST"), "",
			"t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::ImportValue reads another stack's outputs, which only CloudFormation can resolve; use a parameter and WithParameterOverrides instead"},
		{"attribute of an unknown type", eventTemplate("Stream: !GetAtt X.Arn\nStartingPosition: LATEST") + "  X: {Type: AWS::Foo::Bar}\n", "",
			"t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::GetAtt X.Arn: esm cannot resolve attributes of AWS::Foo::Bar resources; use a parameter and WithParameterOverrides instead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			po, err := ParseParameterOverrides(tt.overrides)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse("t.yaml", []byte(tt.template), WithParameterOverrides(po), WithClock(fixedNow))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n got: %v\nwant: %s", err, tt.want)
			}
		})
	}

	tpl, err := Parse("t.yaml", []byte(eventTemplate("")+"        K2: {Type: Kinesis, Properties: {Stream: "+stream+"2, StartingPosition: LATEST}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]string{
		"":   "t.yaml has 2 Kinesis mappings; choose one with the selector: Fn/K, Fn/K2",
		"Fn": `t.yaml: the selector "Fn" matches 2 Kinesis mappings; choose one of: Fn/K, Fn/K2`,
		"X":  `t.yaml: the selector "X" matches no Kinesis mapping; the template has: Fn/K, Fn/K2`,
	} {
		if _, err := tpl.Select(sel); err == nil || err.Error() != want {
			t.Errorf("Select(%q): %v; want %s", sel, err, want)
		}
	}
}
