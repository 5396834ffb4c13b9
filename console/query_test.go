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

func mustParseQuery(t *testing.T, s string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
