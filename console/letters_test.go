package console

import (
	"errors"
	"net/url"
	"testing"
	"time"
)

func TestListQuery(t *testing.T) {
	q := readListQuery(url.Values{"q": {"negative"}, "class": {"poison"}, "type": {"order-placed"}, "since": {"2026-01-02T15:04"}, "until": {"2026-01-02T16:00:30"}})
	f, err := q.filter()
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	until := time.Date(2026, 1, 2, 16, 0, 30, 0, time.UTC)
	if f.Reason != "negative" || f.ErrorClass != "poison" || f.TypeName != "order-placed" || !f.Since.Equal(since) || !f.Until.Equal(until) {
		t.Errorf("filter of %+v: %+v", q, f)
	}
	if back := readListQuery(mustParseQuery(t, q.encode())); back != q {
		t.Errorf("encode then read: %+v, want %+v", back, q)
	}
	for _, bad := range []listQuery{{Since: "yesterday"}, {Since: "2026-01-02T16:00", Until: "2026-01-02T15:00"}} {
		var he *httpError
		if _, err := bad.filter(); !errors.As(err, &he) || he.code != 400 {
			t.Errorf("filter of %+v: %v, want a 400", bad, err)
		}
	}
}

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

func mustParseQuery(t *testing.T, s string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
