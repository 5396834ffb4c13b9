package console

import "testing"

func TestGroupByCause(t *testing.T) {
	l := func(class, reason string, replayed bool) *letter {
		return &letter{ErrorClass: class, Reason: reason, Cause: causeOf(class, reason), Replayed: replayed, TypeName: "order-placed"}
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
