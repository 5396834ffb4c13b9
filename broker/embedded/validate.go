package embedded

import (
	"errors"
	"fmt"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/topics"
)

// ErrInvalidConfig is wrapped by the error that [Start] returns for an
// option value it cannot use; the error names the option and says what to
// change.
var ErrInvalidConfig = errors.New("embedded: invalid configuration")

func (c config) validate() error {
	if c.partitions < 0 {
		return fmt.Errorf("%w: WithPartitions(%d): use a positive partition count, or 0 for the default (%d)", ErrInvalidConfig, c.partitions, broker.DefaultPartitions)
	}
	if c.port < 0 || c.port > 65535 {
		return fmt.Errorf("%w: WithPort(%d): use 0 for a free port or a port in 1..65535", ErrInvalidConfig, c.port)
	}
	for _, t := range c.topics {
		if err := topics.Validate(t); err != nil {
			return fmt.Errorf("%w: WithTopics: %w", ErrInvalidConfig, err)
		}
	}
	for _, u := range c.users {
		if err := u.validate(); err != nil {
			return err
		}
	}
	if c.tls != nil && len(c.tls.Certificates) == 0 && c.tls.GetCertificate == nil && c.tls.GetConfigForClient == nil {
		return fmt.Errorf("%w: WithTLS: the tls.Config has no server certificate; set Certificates or GetCertificate", ErrInvalidConfig)
	}
	return nil
}

func (u saslUser) validate() error {
	switch {
	case u.mechanism != SASLPlain && u.mechanism != SASLScramSHA256 && u.mechanism != SASLScramSHA512:
		return fmt.Errorf("%w: WithSASLUser(%q, %q, …): the mechanism must be %s, %s or %s",
			ErrInvalidConfig, u.mechanism, u.name, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	case u.name == "" || u.password == "":
		return fmt.Errorf("%w: WithSASLUser(%q, %q, …): the user name and the password must not be empty", ErrInvalidConfig, u.mechanism, u.name)
	}
	return nil
}
