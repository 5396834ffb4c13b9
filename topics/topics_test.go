package topics_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/topics"
)

func TestNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{topics.Event("orders", "order-placed"), "orders.order-placed"},
		{topics.Command("inventory", "reserve-stock"), "inventory.reserve-stock"},
		{topics.ConsumerGroup("payments", "order-placed"), "payments.order-placed-consumer"},
		{topics.DeadLetter("payments.order-placed-consumer"), "payments.order-placed-consumer.dlq"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

type (
	OrderPlacedEvent       struct{}
	HTTPServerStartedV2    struct{}
	ShipOrderCommand       struct{}
	UserIDsChanged         struct{}
	Event                  struct{}
	PaymentProcessed       struct{}
	XMLParserFailedEvent   struct{}
	Order_Cancelled        struct{}
	EventCommand           struct{}
	Generic[T any]         struct{}
	selfNamed              struct{}
	ptrNamed               struct{ name string }
	APIV2KeyRotatedCommand struct{}
)

func (selfNamed) TypeName() string   { return "custom-name" }
func (p *ptrNamed) TypeName() string { return p.name }

func TestTypeName(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{OrderPlacedEvent{}, "order-placed"},
		{&OrderPlacedEvent{}, "order-placed"},
		{HTTPServerStartedV2{}, "http-server-started-v2"},
		{ShipOrderCommand{}, "ship-order"},
		{UserIDsChanged{}, "user-ids-changed"},
		{Event{}, "event"},
		{EventCommand{}, "event"},
		{PaymentProcessed{}, "payment-processed"},
		{XMLParserFailedEvent{}, "xml-parser-failed"},
		{Order_Cancelled{}, "order-cancelled"},
		{Generic[int]{}, "generic"},
		{APIV2KeyRotatedCommand{}, "api-v2-key-rotated"},
		{selfNamed{}, "custom-name"},
		{&selfNamed{}, "custom-name"},
		{ptrNamed{name: "by-pointer"}, "by-pointer"},
		{&ptrNamed{name: "by-pointer"}, "by-pointer"},
		{(*selfNamed)(nil), "custom-name"},
		{(*ptrNamed)(nil), ""},
		{(*OrderPlacedEvent)(nil), "order-placed"},
		{nil, ""},
		{struct{}{}, ""},
	}
	for _, tt := range tests {
		if got := topics.TypeName(tt.in); got != tt.want {
			t.Errorf("TypeName(%T) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	valid := []string{"a", "orders.order-placed", "A_b-C.9", strings.Repeat("x", 249), "..."}
	for _, s := range valid {
		if err := topics.Validate(s); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", s, err)
		}
	}
	invalid := map[string]string{
		"":                       "empty",
		".":                      "reserved",
		"..":                     "reserved",
		strings.Repeat("x", 250): "at most 249",
		"bad topic!":             `character ' '`,
		"orders/placed":          `character '/'`,
		"ünicode":                "character",
	}
	for s, reason := range invalid {
		err := topics.Validate(s)
		if !errors.Is(err, topics.ErrInvalid) {
			t.Errorf("Validate(%q) = %v, want ErrInvalid", s, err)
			continue
		}
		if !strings.Contains(err.Error(), reason) {
			t.Errorf("Validate(%q) = %q, want the reason %q", s, err, reason)
		}
	}
}

func ExampleTypeName() {
	type OrderPlacedEvent struct{ OrderID string }
	name := topics.TypeName(OrderPlacedEvent{})
	fmt.Println(topics.Event("orders", name))
	fmt.Println(topics.ConsumerGroup("payments", name))
	fmt.Println(topics.DeadLetter(topics.ConsumerGroup("payments", name)))
	// Output:
	// orders.order-placed
	// payments.order-placed-consumer
	// payments.order-placed-consumer.dlq
}

// A command is read from the topic of the service that handles it.
func ExampleCommand() {
	type ReserveStockCommand struct{ SKU string }
	fmt.Println(topics.Command("inventory", topics.TypeName(ReserveStockCommand{})))
	// Output: inventory.reserve-stock
}
