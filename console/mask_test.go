package console

import "testing"

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
		if got := maskReason(tc.in); got != tc.want {
			t.Errorf("maskReason(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestGroupByCause(t *testing.T) {
	l := func(class, reason string, replayed bool) *letter {
		return &letter{ErrorClass: class, Reason: reason, Replayed: replayed, TypeName: "order-placed"}
	}
	causes := groupByCause([]*letter{
		l("poison", "order 1: amount -5 is negative", false),
		l("poison", "order 2: amount -7 is negative", true),
		l("retryable", "order 3: amount -9 is negative", false),
		l("poison", `sku "x" not found`, false),
	})
	if len(causes) != 3 {
		t.Fatalf("%d causes, want 3 (the class splits the same reason): %+v", len(causes), causes)
	}
	byReason := map[string]*cause{}
	for _, c := range causes {
		byReason[c.Class+" "+c.Reason] = c
	}
	neg := byReason["poison order <n>: amount -<n> is negative"]
	if neg == nil || neg.Count != 2 || neg.Pending != 1 || len(neg.TypeNames) != 1 {
		t.Errorf("the poison negative-amount cause: %+v", neg)
	}
}
