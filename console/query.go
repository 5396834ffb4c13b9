package console

import (
	"fmt"
	"net/url"
	"time"
)

// listQuery is the list's filter form, as typed.
type listQuery struct {
	Text, Class, Type, UUID, Correlation, Since, Until, Cause string
}

// timeLayout is what a datetime-local input sends, read as UTC.
const timeLayout = "2006-01-02T15:04"

func readListQuery(v url.Values) listQuery {
	return listQuery{Text: v.Get("q"), Class: v.Get("class"), Type: v.Get("type"), UUID: v.Get("uuid"),
		Correlation: v.Get("correlation"), Since: v.Get("since"), Until: v.Get("until"), Cause: v.Get("cause")}
}

// filter returns the deadletter filter of q.
func (q listQuery) filter() (filter, error) {
	f := filter{Reason: q.Text, ErrorClass: q.Class, TypeName: q.Type, CorrelationID: q.Correlation, Cause: q.Cause}
	if q.UUID != "" {
		f.UUIDs = []string{q.UUID}
	}
	var err error
	if f.Since, err = parseTime("since", q.Since); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", q.Until); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, badRequest(err.Error())
	}
	return f, nil
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{timeLayout, timeLayout + ":05", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badRequest(fmt.Sprintf("%s: %q is not a time such as 2026-01-02T15:04 (UTC)", field, s))
}

// encode returns q as a query string.
func (q listQuery) encode() string {
	v := url.Values{}
	for k, s := range map[string]string{"q": q.Text, "class": q.Class, "type": q.Type, "uuid": q.UUID,
		"correlation": q.Correlation, "since": q.Since, "until": q.Until, "cause": q.Cause} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}
