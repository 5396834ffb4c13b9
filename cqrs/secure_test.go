package cqrs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestRequestReplyOnSecuredBroker configures a service and a dispatcher
// with nothing but a broker.Config for a broker that takes only TLS and
// SASL: they provision their topics, and a request gets its reply. With a
// wrong password the dispatcher's Start fails with
// broker.ErrAuthenticationFailed, from provisioning and from the reply
// reader alike.
func TestRequestReplyOnSecuredBroker(t *testing.T) {
	ctx := kototest.Context(t)
	_, secure := kototest.SecureBroker(t, sarama.SASLTypeSCRAMSHA512)
	payments, orders := kototest.ServiceName(t, "payments"), kototest.ServiceName(t, "orders")
	svc := newService(t, secure.Brokers, cqrs.ServiceConfig{Name: payments, Broker: secure, AutoProvisionTopics: true})
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err := svc.Register(ctx, r, cqrs.NewCommandConsumerWithResult(func(_ context.Context, cmd *ChargeCardCommand) (CardCharged, error) {
		return CardCharged{ID: cmd.ID}, nil
	}))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)
	pub, err := broker.NewPublisher(secure)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	cfg := cqrs.CommandDispatcherConfig{
		Service: orders, Broker: secure, AutoProvisionTopics: true,
		Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand](topics.Command(payments, "charge-card"))},
	}
	got, err := cqrs.Request[CardCharged](ctx, newDispatcher(t, pub, secure.Brokers, cfg), ChargeCardCommand{ID: "c-1"})
	if err != nil || got.ID != "c-1" {
		t.Fatalf("Request on the secured broker: %+v, %v; want the reply to c-1", got, err)
	}

	cfg.Broker.SASL.Password += "-wrong"
	for _, provision := range []bool{true, false} {
		cfg.AutoProvisionTopics = provision
		d, err := cqrs.NewCommandDispatcher(pub, cfg)
		if err != nil {
			t.Fatalf("NewCommandDispatcher: %v", err)
		}
		if err := d.Start(ctx); !errors.Is(err, broker.ErrAuthenticationFailed) {
			t.Errorf("Start with a wrong password (AutoProvisionTopics %v): %v, want broker.ErrAuthenticationFailed", provision, err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}
