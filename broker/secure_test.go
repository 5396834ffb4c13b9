package broker_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestSecuredBroker runs every client of the package against a broker that
// takes only TLS connections authenticated with SASL: with the right
// credentials they provision, publish, subscribe and tail; with wrong ones
// each fails with ErrAuthenticationFailed instead of hanging or retrying
// without end.
func TestSecuredBroker(t *testing.T) {
	for _, mechanism := range []sarama.SASLMechanism{sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512} {
		t.Run(string(mechanism), func(t *testing.T) {
			t.Parallel()
			kafka, cfg := kototest.SecureBroker(t, mechanism)
			t.Run("right credentials", func(t *testing.T) { useEveryClient(t, kafka, cfg) })

			attempts := kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.SASLAuthenticate}, Count: -1, Observe: true})
			t.Run("wrong password", func(t *testing.T) {
				bad := cfg
				bad.SASL.Password += "-wrong"
				assertEveryClientRejected(t, bad)
			})
			t.Run("unknown user", func(t *testing.T) {
				bad := cfg
				bad.SASL.User = "mallory"
				assertEveryClientRejected(t, bad)
			})
			t.Logf("%s: %d SaslAuthenticate requests for %d rejected calls", mechanism, attempts.Hits(), 2*rejectedCalls)
		})
	}
}

// useEveryClient provisions a topic and a reply topic, tails the reply
// topic, publishes to both and consumes the topic in a group.
func useEveryClient(t *testing.T, kafka *embedded.Broker, cfg broker.Config) {
	ctx := kototest.Context(t)
	topic, replies := kototest.Topic(t, "secure"), kototest.Topic(t, "secure-replies")
	cfg.Provision.Partitions = 2 // not the auto-creation default, so provisioning shows
	if err := broker.ProvisionTopics(ctx, cfg, topic, replies); err != nil {
		t.Fatalf("ProvisionTopics: %v", err)
	}
	for _, name := range []string{topic, replies} {
		if n := len(kafka.Cluster().PartitionInfos(name)); n != 2 {
			t.Fatalf("topic %s has %d partitions after provisioning, want 2", name, n)
		}
	}

	tailed := make(chan *message.Message, 1)
	r := startTailReader(ctx, t, cfg, replies, func(m *message.Message) { tailed <- m })
	defer closeTailReader(t, r)

	pub := kototest.NewPublisher(t, cfg)
	publish(t, pub, topic, "", "event")
	publish(t, pub, replies, "", "reply")

	cfg.ConsumerGroup = kototest.Group(t, "secure")
	if m := kototest.Receive(t, kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic), "message"); string(m.Payload) != "event" {
		t.Fatalf("subscriber received %q, want \"event\"", m.Payload)
	} else {
		m.Ack()
	}
	if m := kototest.Receive(t, tailed, "message"); string(m.Payload) != "reply" {
		t.Fatalf("tail reader received %q, want \"reply\"", m.Payload)
	}
}

// rejectedCalls is how many clients assertEveryClientRejected tries.
const rejectedCalls = 6

// assertEveryClientRejected checks that each client fails with
// ErrAuthenticationFailed, each within the test's bound.
func assertEveryClientRejected(t *testing.T, bad broker.Config) {
	topic := kototest.Topic(t, "rejected")
	calls := map[string]func(ctx context.Context) error{
		"ProvisionTopics": func(ctx context.Context) error { return broker.ProvisionTopics(ctx, bad, topic) },
		"NewPublisher": func(context.Context) error {
			pub, err := broker.NewPublisher(bad)
			if err == nil {
				_ = pub.Close()
			}
			return err
		},
		"NewProducer": func(context.Context) error {
			p, err := broker.NewProducer(bad)
			if err == nil {
				_ = p.Close()
			}
			return err
		},
		"NewSaramaClient": func(context.Context) error {
			c, err := broker.NewSaramaClient(bad)
			if err == nil {
				_ = c.Close()
			}
			return err
		},
		"TailReader.Start": func(ctx context.Context) error {
			r, err := broker.NewTailReader(bad, topic, func(*message.Message) {})
			if err != nil {
				t.Fatalf("NewTailReader: %v", err)
			}
			defer closeTailReader(t, r)
			return r.Start(ctx)
		},
		"Subscriber.Subscribe": func(ctx context.Context) error {
			cfg := bad
			cfg.ConsumerGroup = kototest.Group(t, "rejected")
			sub := kototest.NewSubscriber(t, cfg)
			_, err := sub.Subscribe(ctx, topic)
			return err
		},
	}
	if len(calls) != rejectedCalls {
		t.Fatalf("%d clients tried, rejectedCalls says %d", len(calls), rejectedCalls)
	}
	for name, call := range calls {
		err := returnsWithin(t, name, call)
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, broker.ErrAuthenticationFailed) {
			t.Errorf("%s with wrong credentials: %v, want an error wrapping ErrAuthenticationFailed", name, err)
			continue
		}
		if name != "Subscriber.Subscribe" && !strings.Contains(err.Error(), "rejected") {
			t.Errorf("%s: error %q does not say the credentials were rejected", name, err)
		}
	}
}

// TestUntrustedServerCertificateFails connects to a TLS broker with a
// client that does not trust its certificate.
func TestUntrustedServerCertificateFails(t *testing.T) {
	_, cfg := kototest.SecureBroker(t, sarama.SASLTypePlaintext)
	cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12} // system roots only
	err := returnsWithin(t, "NewPublisher", func(context.Context) error {
		pub, err := broker.NewPublisher(cfg)
		if err == nil {
			_ = pub.Close()
		}
		return err
	})
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("NewPublisher with an untrusted server certificate: %v, want a certificate verification error", err)
	}
}

// returnsWithin runs call with a test context and fails the test when it
// has not returned after kototest.DefaultTimeout: a hang or an endless retry.
func returnsWithin(t *testing.T, name string, call func(context.Context) error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call(kototest.Context(t)) }()
	select {
	case err := <-done:
		return err
	case <-time.After(kototest.DefaultTimeout + 5*time.Second):
		t.Fatalf("%s has not returned after %s", name, kototest.DefaultTimeout)
		return nil
	}
}
