package deadletter_test

import (
	"testing"

	"github.com/koto-dev/watermill-koto/deadletter"
)

func TestMaskReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`json: cannot unmarshal string into Go struct field OrderPlaced.total of type int64`,
			`json: cannot unmarshal string into Go struct field OrderPlaced.total of type int64`},
		{`order 0190a2b4-7c1e-7000-8000-00000000002a: amount -42 is negative`, `order <uuid>: amount -<n> is negative`},
		{`unexpected end of JSON input at offset 14`, `unexpected end of JSON input at offset <n>`},
		{`sku "sku-7" not found`, `sku "…" not found`},
		{`sku 'sku-7' not found, can't reserve`, `sku '…' not found, can't reserve`},
		{"column `total` missing", "column `…` missing"},
		{`dial tcp 10.0.0.1:5432: connection refused`, `dial tcp <n>: connection refused`},
		{`expired at 2026-01-02T15:04:05.123Z, took 1.5s`, `expired at <time>, took <n>s`},
		{`bad checksum 0xdeadBEEF for v2 record`, `bad checksum <n> for v2 record`},
		{"  spaced\tout  ", "spaced out"},
	} {
		if got := deadletter.MaskReason(tc.in); got != tc.want {
			t.Errorf("MaskReason(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
