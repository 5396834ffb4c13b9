package console

import (
	"net/url"
	"testing"
	"time"
)

func TestSelectionOfOneLetter(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC)
	f, _, err := (&Handler{}).selection(t.Context(), "g", url.Values{"scope": {"letter"}, "uuid": {"u-1"}, "at": {at.Format(time.RFC3339Nano)}})
	if err != nil {
		t.Fatal(err)
	}
	one := &letter{UUID: "u-1", FailedAt: at}
	later := &letter{UUID: "u-1", FailedAt: at.Add(time.Nanosecond)}
	if !f.Match(one) || f.Match(later) || f.Match(&letter{UUID: "u-2", FailedAt: at}) {
		t.Errorf("filter %+v selects more or less than the one dead letter", f)
	}
	for _, form := range []url.Values{{"scope": {"letter"}}, {"scope": {"selected"}}, {"scope": {"everything"}}} {
		if _, _, err := (&Handler{}).selection(t.Context(), "g", form); err == nil {
			t.Errorf("selection %v: no error", form)
		}
	}
}
