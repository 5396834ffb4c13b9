package broker

import (
	"context"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// scramClientGenerator returns what sarama needs for a SCRAM mechanism and
// does not ship: a client side of the exchange. It is franz-go's RFC 5802
// implementation behind sarama's interface; nil for other mechanisms.
func scramClientGenerator(mechanism sarama.SASLMechanism) func() sarama.SCRAMClient {
	var mech func(func(context.Context) (scram.Auth, error)) sasl.Mechanism
	switch mechanism {
	case sarama.SASLTypeSCRAMSHA256:
		mech = scram.Sha256
	case sarama.SASLTypeSCRAMSHA512:
		mech = scram.Sha512
	default:
		return nil
	}
	return func() sarama.SCRAMClient { return &scramClient{newMechanism: mech} }
}

// scramClient runs one SCRAM exchange for sarama: Step("") returns the
// client-first message, the next Step the client-final one, and the last
// Step checks the server's signature.
type scramClient struct {
	newMechanism func(func(context.Context) (scram.Auth, error)) sasl.Mechanism
	auth         scram.Auth
	session      sasl.Session
	done         bool
}

// Begin keeps the credentials for the exchange.
func (c *scramClient) Begin(user, password, authzID string) error {
	c.auth = scram.Auth{User: user, Pass: password, Zid: authzID}
	return nil
}

// Step answers the server's challenge.
func (c *scramClient) Step(challenge string) (string, error) {
	if c.session == nil {
		auth := c.auth
		session, first, err := c.newMechanism(func(context.Context) (scram.Auth, error) { return auth, nil }).
			Authenticate(context.Background(), "")
		c.session = session
		return string(first), err
	}
	done, resp, err := c.session.Challenge([]byte(challenge))
	c.done = done
	return string(resp), err
}

// Done reports whether the server's signature was verified.
func (c *scramClient) Done() bool { return c.done }
