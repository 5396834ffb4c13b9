package koto_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

func TestInvalidRecord(t *testing.T) {
	msg := message.NewMessage("1", nil)
	if err := koto.InvalidRecord(msg); err != nil {
		t.Errorf("InvalidRecord of an unmarked message = %v, want nil", err)
	}
	msg.Metadata.Set(koto.InvalidRecordMetadataKey, "CloudEvents: no ce_id")
	err := koto.InvalidRecord(msg)
	if !errors.Is(err, koto.ErrInvalidRecord) || !strings.Contains(err.Error(), "CloudEvents: no ce_id") {
		t.Errorf("InvalidRecord of a marked message = %v, want ErrInvalidRecord with the reason", err)
	}
}
