package middleware

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// keysOnly is a ParkingStore with nothing parked; only ParkedKeys is
// called while nothing is.
type keysOnly struct{ ParkingStore }

func (keysOnly) ParkedKeys(context.Context, string, string, int32) ([][]byte, error) { return nil, nil }

// BenchmarkParkingGate measures what parking costs a message whose key
// has nothing parked: the check before the handler.
func BenchmarkParkingGate(b *testing.B) {
	p := &parker{cfg: ParkingConfig{Store: keysOnly{}}}
	msg := message.NewMessage("gate", nil)
	ctx := koto.ContextWithPosition(context.Background(), koto.Position{Topic: "t", Key: []byte("k-1"), Generation: 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, g, err := p.before(ctx, msg, "group"); err != nil || g != gateRun {
			b.Fatalf("gate %v, %v; want to run the handler", g, err)
		}
	}
}
