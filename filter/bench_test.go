package filter

import (
	"strings"
	"testing"
	"time"
)

// benchRecord is a typical 1 KiB JSON order event.
var benchRecord = func() []byte {
	s := `{"type":"order","version":3,"id":"8f14e45f-ceea-467f-a0d6-b6a1e5c9f1a2",` +
		`"time":"2024-05-01T12:34:56.789Z","source":"web","order":{"status":"paid","total":249.99,` +
		`"currency":"USD","items":[{"sku":"SKU-1001","qty":2,"price":49.99,"tags":["gift","sale"]},` +
		`{"sku":"SKU-2002","qty":1,"price":150.01,"tags":["new"]}],"coupon":null,"express":true},` +
		`"customer":{"id":"c-12345","country":"US-CA","email":"someone@example.com","tier":"gold",` +
		`"since":"2019-03-02","marketing":false},"shipping":{"method":"ground","address":{"line1":` +
		`"1 Main Street","city":"Springfield","zip":"12345","country":"US"}},"notes":"`
	pad := 1024 - len(s) - len(`"}`)
	return []byte(s + strings.Repeat("n", pad) + `"}`)
}()

// BenchmarkMatch measures Match on one 1 KiB record. "typical" is a realistic filter that
// matches; "miss" has two filters that both fail; "metadata" never decodes the data;
// "not-json" is the non-JSON path.
func BenchmarkMatch(b *testing.B) {
	if len(benchRecord) != 1024 {
		b.Fatalf("bench record is %d bytes, want 1024", len(benchRecord))
	}
	typical := `{"data":{"type":["order"],"order":{"status":[{"anything-but":["cancelled","refunded"]}],` +
		`"total":[{"numeric":[">",100]}],"items":{"tags":["gift"]}},"customer":{"country":[{"prefix":"US"}]}}}`
	cases := []struct {
		name     string
		patterns []string
		data     []byte
		want     bool
	}{
		{"typical", []string{typical}, benchRecord, true},
		{"miss", []string{`{"data":{"type":["refund"]}}`, `{"data":{"order":{"total":[{"numeric":[">",1000]}]}}}`}, benchRecord, false},
		{"metadata", []string{`{"partitionKey":[{"prefix":"pk-"}]}`}, benchRecord, true},
		{"not-json", []string{typical}, []byte(strings.Repeat("x", 1024)), false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			f, err := Compile(tc.patterns)
			if err != nil {
				b.Fatal(err)
			}
			rec := Record{Data: tc.data, PartitionKey: "pk-1", SequenceNumber: "1", ApproximateArrivalTimestamp: time.Unix(1, 0)}
			if f.Match(rec) != tc.want {
				b.Fatalf("Match = %v, want %v", !tc.want, tc.want)
			}
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for b.Loop() {
				f.Match(rec)
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	p := `{"data":{"type":["order"],"order":{"status":[{"anything-but":["cancelled","refunded"]}],` +
		`"total":[{"numeric":[">",100]}]},"$or":[{"customer":{"tier":["gold"]}},{"order":{"express":[true]}}]}}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile([]string{p}); err != nil {
			b.Fatal(err)
		}
	}
}
