package console

import (
	"net/url"
	"testing"
)

// TestSelectionOfLetters: one dead letter, or the ticked ones, are
// selected by their positions alone, whatever their UUIDs.
func TestSelectionOfLetters(t *testing.T) {
	at := func(partition int32, offset int64, uuid string) *letter {
		return &letter{Partition: partition, Offset: offset, UUID: uuid}
	}
	f, _, err := (&Handler{}).selection(t.Context(), "g", url.Values{"scope": {"letter"}, "at": {"1/42"}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(at(1, 42, "")) || f.Match(at(1, 43, "")) || f.Match(at(0, 42, "")) {
		t.Errorf("filter %+v selects more or less than the dead letter at 1/42", f)
	}
	f, what, err := (&Handler{}).selection(t.Context(), "g", url.Values{"scope": {"selected"}, "at": {"0/1", "2/3"}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(at(0, 1, "u-1")) || !f.Match(at(2, 3, "")) || f.Match(at(0, 2, "u-1")) || what != "2 selected dead letters" {
		t.Errorf("filter %+v (%s) selects more or less than the two ticked", f, what)
	}
	for _, form := range []url.Values{{"scope": {"letter"}}, {"scope": {"letter"}, "at": {"u-1"}}, {"scope": {"selected"}},
		{"scope": {"selected"}, "at": {"1/x"}}, {"scope": {"everything"}}} {
		if _, _, err := (&Handler{}).selection(t.Context(), "g", form); err == nil {
			t.Errorf("selection %v: no error", form)
		}
	}
}
