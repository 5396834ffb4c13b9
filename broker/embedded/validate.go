package embedded

import (
	"github.com/koto-dev/watermill-koto/broker"
	kconfig "github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/topics"
)

// validate reports every option value Start cannot use, each named by its
// option, in one error that wraps koto.ErrInvalidConfig.
func (c config) validate() error {
	p := kconfig.For("embedded.Start")
	if c.partitions < 0 {
		p.Add("WithPartitions", "is negative (%d); use 0 for the default (%d) or a positive partition count", c.partitions, broker.DefaultPartitions)
	}
	if c.port < 0 || c.port > 65535 {
		p.Add("WithPort", "(%d) is out of range; use 0 for a free port or a port in 1..65535", c.port)
	}
	for _, t := range c.topics {
		if err := topics.Validate(t); err != nil {
			p.Add("WithTopics", "%w", err)
		}
	}
	for _, u := range c.users {
		u.validate(p)
	}
	if c.tls != nil && len(c.tls.Certificates) == 0 && c.tls.GetCertificate == nil && c.tls.GetConfigForClient == nil {
		p.Add("WithTLS", "has no server certificate; set the tls.Config's Certificates or GetCertificate")
	}
	return p.Err()
}

func (u saslUser) validate(p *kconfig.Problems) {
	if u.mechanism != SASLPlain && u.mechanism != SASLScramSHA256 && u.mechanism != SASLScramSHA512 {
		p.Add("WithSASLUser", "(%q, %q, …) has an unknown mechanism; use %s, %s or %s",
			u.mechanism, u.name, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if u.name == "" || u.password == "" {
		p.Add("WithSASLUser", "(%q, %q, …) has an empty user name or password; set both", u.mechanism, u.name)
	}
}
