package embedded_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestSecuredBrokerWithFranzGo checks the broker's security with a client
// other than sarama: TLS with each SASL mechanism works with the right
// password, and a wrong one is answered as Kafka answers it,
// SASL_AUTHENTICATION_FAILED, not with a dropped connection.
func TestSecuredBrokerWithFranzGo(t *testing.T) {
	serverTLS, clientTLS := kototest.TLSConfigs(t)
	b := kototest.Embedded(t, embedded.WithTLS(serverTLS), embedded.WithSASLUser(embedded.SASLPlain, "plain-user", "plain-pass"), embedded.WithSASLUser(embedded.SASLScramSHA256, "scram256-user", "scram256-pass"), embedded.WithSASLUser(embedded.SASLScramSHA512, "scram512-user", "scram512-pass"))
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
			ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
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

// TestSecuredBrokerAdvertisesHandshakeV0 speaks the protocol as librdkafka
// does on a new connection: ApiVersions v3 must list SaslHandshake from
// version 0, or librdkafka does not enable SASL. A client that then does
// send the unimplemented v0 handshake is refused with UNSUPPORTED_VERSION
// and the broker's mechanisms, not with a dropped connection.
func TestSecuredBrokerAdvertisesHandshakeV0(t *testing.T) {
	b := kototest.Embedded(t, embedded.WithSASLUser(embedded.SASLPlain, "user", "pass"))
	conn, err := net.DialTimeout("tcp", b.Addrs()[0], kototest.DefaultTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(kototest.DefaultTimeout))

	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.Version = 3
	apiVersions.ClientSoftwareName, apiVersions.ClientSoftwareVersion = "librdkafka", "2.0.2"
	versions := roundTrip(t, conn, apiVersions, 1).(*kmsg.ApiVersionsResponse)
	i := slices.IndexFunc(versions.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == int16(kmsg.SASLHandshake) })
	if i < 0 || versions.ApiKeys[i].MinVersion != 0 || versions.ApiKeys[i].MaxVersion < 1 {
		t.Fatalf("ApiVersions advertises SaslHandshake %+v (index %d), want versions 0..1", versions.ApiKeys[max(i, 0)], i)
	}

	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Version, handshake.Mechanism = 0, embedded.SASLPlain
	refused := roundTrip(t, conn, handshake, 2).(*kmsg.SASLHandshakeResponse)
	if err := kerr.ErrorForCode(refused.ErrorCode); !errors.Is(err, kerr.UnsupportedVersion) || !slices.Equal(refused.SupportedMechanisms, []string{embedded.SASLPlain}) {
		t.Fatalf("SaslHandshake v0 answered %v with mechanisms %q, want UNSUPPORTED_VERSION and [PLAIN]", err, refused.SupportedMechanisms)
	}
}

// roundTrip sends req with correlation ID corr on conn and reads its
// response.
func roundTrip(t *testing.T, conn net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("koto-test")).AppendRequest(nil, req, corr)); err != nil {
		t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("read the %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, buf); err != nil || len(buf) < 4 || int32(binary.BigEndian.Uint32(buf)) != corr {
		t.Fatalf("read the %s response %x: %v, want correlation ID %d", kmsg.NameForKey(req.Key()), buf, err, corr)
	}
	body := buf[4:]
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = body[1:] // the header's tagged fields, none
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode the %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}
