package fakedynamo

import "testing"

// TestCheckNumber: DynamoDB's limits on numbers, at their edges.
func TestCheckNumber(t *testing.T) {
	ok := []string{"0", "-0.000", "1", "+1.5", ".5", "5.", "9.9999999999999999999999999999999999999E+125", "1E-130", "12345678901234567890123456789012345678", "1000000000000000000000000000000000000000000", "0.000123e-126"}
	bad := []string{"", "abc", "1e", "--1", "1e999999999", "1E+126", "1E-131", "123456789012345678901234567890123456789", "1.2.3", "0x10", "NaN", "Infinity", "1e1234567890"}
	for _, s := range ok {
		if err := checkNumber(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range bad {
		if checkNumber(s) == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
