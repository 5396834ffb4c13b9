package main

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
)

// Environment variables that give the Kafka flags their defaults. Prefer
// the variable to -sasl-password: a command line is visible to every user
// of the machine.
const (
	envBrokers       = "KAFKA_BROKERS"
	envSASLUser      = "KAFKA_SASL_USER"
	envSASLPassword  = "KAFKA_SASL_PASSWORD"
	envSASLMechanism = "KAFKA_SASL_MECHANISM"
)

// defaultClientID is the client ID brokers see in their logs and quotas.
const defaultClientID = "koto"

// kafkaFlags are the connection flags every command that talks to Kafka
// shares; config turns them into the broker.Config the services use.
type kafkaFlags struct {
	getenv                  func(string) string
	brokers                 envFlag
	clientID                string
	saslUser, saslMechanism envFlag
	saslPassword            string
	tls, tlsInsecure        bool
	tlsCA, tlsServerName    string
}

func (k *kafkaFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	k.getenv = getenv
	fs.Var(&k.brokers, "brokers", "comma-separated Kafka bootstrap brokers, `host:port,...` (default $"+envBrokers+")")
	fs.StringVar(&k.clientID, "client-id", defaultClientID, "client ID the brokers see")
	fs.Var(&k.saslUser, "sasl-user", "SASL `user`; turns SASL on (default $"+envSASLUser+")")
	fs.StringVar(&k.saslPassword, "sasl-password", "", "SASL `password` (default $"+envSASLPassword+", which is safer: other users can see a command line)")
	fs.Var(&k.saslMechanism, "sasl-mechanism", "SASL `mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default $"+envSASLMechanism+", else PLAIN)")
	fs.BoolVar(&k.tls, "tls", false, "connect with TLS, trusting the system's certificate authorities")
	fs.StringVar(&k.tlsCA, "tls-ca", "", "PEM file of the certificate authorities to trust (implies -tls)")
	fs.StringVar(&k.tlsServerName, "tls-server-name", "", "server name to verify the brokers' certificates against (default: the broker's host; implies -tls)")
	fs.BoolVar(&k.tlsInsecure, "tls-insecure-skip-verify", false, "do not verify the brokers' certificates: for tests only (implies -tls)")
}

// config returns the broker configuration the flags describe.
func (k *kafkaFlags) config() (broker.Config, error) {
	cfg := broker.Config{Brokers: broker.SplitBrokers(k.brokers.or(k.getenv, envBrokers)), ClientID: k.clientID}
	if len(cfg.Brokers) == 0 {
		return cfg, usageError("no Kafka brokers: set -brokers host:port,... or $" + envBrokers)
	}
	user, mechanism := k.saslUser.or(k.getenv, envSASLUser), k.saslMechanism.or(k.getenv, envSASLMechanism)
	password := cmp.Or(k.saslPassword, k.getenv(envSASLPassword))
	switch {
	case user != "" && password == "":
		return cfg, usageError("-sasl-user is set but no password: set $" + envSASLPassword + " or -sasl-password")
	case user != "":
		cfg.SASL = broker.SASLConfig{User: user, Password: password, Mechanism: sarama.SASLMechanism(strings.ToUpper(mechanism))}
	case mechanism != "":
		return cfg, usageError("-sasl-mechanism is set but -sasl-user is empty")
	}
	if k.tls || k.tlsCA != "" || k.tlsServerName != "" || k.tlsInsecure {
		tc, err := k.tlsConfig()
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tc
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError(err.Error())
	}
	return cfg, nil
}

func (k *kafkaFlags) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: k.tlsServerName, InsecureSkipVerify: k.tlsInsecure} //nolint:gosec // only when asked for, and said so in the flag
	if k.tlsCA == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(k.tlsCA)
	if err != nil {
		return nil, fmt.Errorf("-tls-ca: %w", err)
	}
	tc.RootCAs = x509.NewCertPool()
	if !tc.RootCAs.AppendCertsFromPEM(pem) {
		return nil, usageError(fmt.Sprintf("-tls-ca %s: no PEM certificate in it", k.tlsCA))
	}
	return tc, nil
}

// envFlag is a string flag whose default is an environment variable, read
// after parsing: the help names the variable and never shows its value
// (the list of brokers, a user name) as the flag's default.
type envFlag struct {
	value string
	set   bool
}

func (f *envFlag) String() string { return f.value }

func (f *envFlag) Set(s string) error {
	f.value, f.set = s, true
	return nil
}

// or returns the flag's value when it was given, even empty, and else the
// variable env.
func (f *envFlag) or(getenv func(string) string, env string) string {
	if f.set {
		return f.value
	}
	return getenv(env)
}
