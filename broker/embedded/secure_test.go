package embedded_test

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// TestSecuredBrokerWithFranzGo checks the broker's security with a client
// other than sarama: TLS with each SASL mechanism works with the right
// password, and a wrong one is answered as Kafka answers it,
// SASL_AUTHENTICATION_FAILED, not with a dropped connection.
func TestSecuredBrokerWithFranzGo(t *testing.T) {
	serverTLS, clientTLS := kafkatest.TLSConfigs(t)
	b := kafkatest.Embedded(t, embedded.WithTLS(serverTLS), embedded.WithSASLUser(embedded.SASLPlain, "plain-user", "plain-pass"), embedded.WithSASLUser(embedded.SASLScramSHA256, "scram256-user", "scram256-pass"), embedded.WithSASLUser(embedded.SASLScramSHA512, "scram512-user", "scram512-pass"))
	mechanisms := map[string]func(user, pass string) sasl.Mechanism{
		embedded.SASLPlain: func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
		embedded.SASLScramSHA256: func(u, p string) sasl.Mechanism {
			return scram.Auth{User: u, Pass: p}.AsSha256Mechanism()
		},
		embedded.SASLScramSHA512: func(u, p string) sasl.Mechanism {
			return scram.Auth{User: u, Pass: p}.AsSha512Mechanism()
		},
	}
	users := map[string]string{
		embedded.SASLPlain: "plain", embedded.SASLScramSHA256: "scram256", embedded.SASLScramSHA512: "scram512",
	}
	for name, mech := range mechanisms {
		user := users[name]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
			defer cancel()
			good := newKgoClient(t, b.Addrs(), kgo.DialTLSConfig(clientTLS), kgo.SASL(mech(user+"-user", user+"-pass")),
				kgo.AllowAutoTopicCreation())
			if err := good.ProduceSync(ctx, &kgo.Record{Topic: "secured-" + user, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatalf("produce with the right password: %v", err)
			}
			bad := newKgoClient(t, b.Addrs(), kgo.DialTLSConfig(clientTLS), kgo.SASL(mech(user+"-user", "wrong")))
			if err := bad.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("ping with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}
