package console

import (
	"errors"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
)

func TestConfigValidate(t *testing.T) {
	err := Config{
		SampleInterval: -1, ListLimit: -1, Groups: []string{" "},
		Tokens: []Token{{Name: "ops", Secret: "short"}, {Name: "ops", Secret: "0123456789abcdef"}, {Secret: "0123456789abcdef"}},
	}.Validate()
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("Validate: %v, want koto.ErrInvalidConfig", err)
	}
	for _, want := range []string{"Broker", "SampleInterval is negative", "ListLimit is negative", "Groups[0] is empty",
		"Tokens[0].Secret is 5 bytes", `Tokens[1].Name "ops" is used twice`, "Tokens[2].Name is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate's error lacks %q:\n%v", want, err)
		}
	}
	if err := (Config{Broker: broker.Config{Brokers: []string{"127.0.0.1:9092"}}}).Validate(); err != nil {
		t.Errorf("Validate of a config with brokers alone: %v", err)
	}
	if _, err := NewHandler(Config{}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("NewHandler without brokers: %v, want koto.ErrInvalidConfig", err)
	}
}
