package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestConfigErrorsNameTheField: a bad configuration fails at construction
// with an error that wraps ErrInvalidConfig and names the field by its
// full path.
func TestConfigErrorsNameTheField(t *testing.T) {
	pub := gochannel.NewGoChannel(gochannel.Config{}, nil)
	defer pub.Close()
	store := memoryStore(t)
	pool, err := pgxpool.New(context.Background(), pgtest.URL()) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pgStore := postgresStoreIn(t, pool, "unused")
	idem := func(s idempotency.Store, cfg middleware.IdempotencyConfig) func() error {
		return func() error { _, err := middleware.Idempotency(s, cfg); return err }
	}
	deadLetter := func(p message.Publisher, cfg middleware.DeadLetterConfig) func() error {
		return func() error { _, err := middleware.DeadLetter(p, cfg); return err }
	}
	defaults := func(cfg middleware.Config) func() error {
		return func() error { _, err := middleware.Defaults(cfg); return err }
	}
	cases := []struct {
		field string
		err   func() error
	}{
		{"middleware.DeadLetterConfig has no publisher", deadLetter(nil, middleware.DeadLetterConfig{})},
		{"middleware.DeadLetterConfig.MaxAttempts", deadLetter(pub, middleware.DeadLetterConfig{MaxAttempts: -1})},
		{"middleware.DeadLetterConfig.MaxElapsedTime", deadLetter(pub, middleware.DeadLetterConfig{MaxElapsedTime: -1})},
		{"middleware.DeadLetterConfig.Topic", deadLetter(pub, middleware.DeadLetterConfig{Topic: "no spaces"})},
		{"middleware.DeadLetterConfig.Parking.Store is nil but Parking.Delays are set",
			deadLetter(pub, middleware.DeadLetterConfig{Parking: middleware.ParkingConfig{Delays: []time.Duration{time.Minute}}})},
		{"middleware.DeadLetterConfig.Parking.Delays [1] is negative", deadLetter(pub, middleware.DeadLetterConfig{
			Parking: middleware.ParkingConfig{Delays: []time.Duration{time.Minute, -time.Minute}}})},
		{"middleware.DeadLetterConfig.Backoff.Multiplier", deadLetter(pub, middleware.DeadLetterConfig{Backoff: koto.Backoff{Multiplier: 0.5}})},
		{"middleware.DeadLetterConfig.Backoff.MaxInterval", deadLetter(pub, middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: 20e9}})},
		{"middleware.IdempotencyConfig has no store", idem(nil, middleware.IdempotencyConfig{})},
		{"middleware.IdempotencyConfig.StoreTimeout", idem(store, middleware.IdempotencyConfig{StoreTimeout: -1})},
		{"middleware.IdempotencyConfig.MarkBackoff.InitialInterval", idem(store, middleware.IdempotencyConfig{MarkBackoff: koto.Backoff{InitialInterval: -1}})},
		{"middleware.IdempotencyConfig.MarkAfterAckTimeout", idem(store, middleware.IdempotencyConfig{MarkAfterAckTimeout: -1})},
		{"middleware.IdempotencyConfig.Transactional is set, so the store must be an idempotency.TxStore",
			idem(store, middleware.IdempotencyConfig{Transactional: true})},
		{"middleware.IdempotencyConfig.IgnoreStoreErrors", idem(pgStore, middleware.IdempotencyConfig{Transactional: true, IgnoreStoreErrors: true})},
		{"middleware.Config.Publisher", defaults(middleware.Config{})},
		{"middleware.Config.DeadLetter.MaxAttempts", defaults(middleware.Config{Publisher: pub, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: -2}})},
		{"middleware.Config.Idempotency.StoreTimeout", defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: middleware.IdempotencyConfig{StoreTimeout: -1}})},
		{"middleware.Config.Store is a *idempotency.MemoryStore, but Idempotency.Transactional needs an idempotency.TxStore",
			defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: middleware.IdempotencyConfig{Transactional: true}})},
		{"middleware.Config.Store is nil but Idempotency.Transactional is set",
			defaults(middleware.Config{Publisher: pub, Idempotency: middleware.IdempotencyConfig{Transactional: true}})},
		{"middleware.Config.Idempotency.IgnoreStoreErrors", defaults(middleware.Config{Publisher: pub, Store: pgStore,
			Idempotency: middleware.IdempotencyConfig{Transactional: true, IgnoreStoreErrors: true}})},
		{"middleware.DeadLetterConfig.Backoff.InitialInterval", func() error {
			return middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: -1}}.Validate()
		}},
		{"koto.Backoff.Multiplier", func() error { return koto.Backoff{Multiplier: -1}.Validate() }},
		{"koto.Backoff.MaxInterval is negative", func() error { return koto.Backoff{MaxInterval: -1}.Validate() }},
		{"middleware.Config.Idempotency.MarkBackoff.MaxInterval", func() error {
			return middleware.Config{Publisher: pub, Idempotency: middleware.IdempotencyConfig{
				MarkBackoff: koto.Backoff{InitialInterval: time.Second, MaxInterval: time.Millisecond}}}.Validate()
		}},
		{"middleware.Config.DeadLetter.MaxElapsedTime", func() error {
			return middleware.Config{Publisher: pub, DeadLetter: middleware.DeadLetterConfig{MaxElapsedTime: -time.Second}}.Validate()
		}},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), "invalid configuration: "+c.field) || !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("want an error wrapping ErrInvalidConfig and naming %s, got %v", c.field, err)
		}
	}
}

// TestValidateReportsEveryProblem: every invalid field of the chain's
// configuration is reported at once, the nested configurations' under
// their full path, one a line.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := middleware.Config{
		Store: memoryStore(t),
		Idempotency: middleware.IdempotencyConfig{
			Transactional: true, StoreTimeout: -1, IgnoreStoreErrors: true,
			MarkBackoff: koto.Backoff{InitialInterval: time.Second, MaxInterval: time.Millisecond},
		},
		DeadLetter: middleware.DeadLetterConfig{Topic: "no spaces", MaxAttempts: -1, Backoff: koto.Backoff{Multiplier: 0.5}},
	}.Validate()
	want := []string{
		"middleware.Config.Publisher is nil; set it to the publisher that sends dead letters",
		"middleware.Config.Store is a *idempotency.MemoryStore, but Idempotency.Transactional needs an idempotency.TxStore (a *postgres.Store)",
		"middleware.Config.Idempotency.StoreTimeout is negative (-1ns); use 0 for the default (5s) or a positive duration",
		"middleware.Config.Idempotency.MarkBackoff.MaxInterval (1ms) is less than InitialInterval (1s); raise MaxInterval or lower InitialInterval",
		"middleware.Config.Idempotency.IgnoreStoreErrors is set with Transactional, but the transactional mode cannot run a handler without its database; unset it",
		`middleware.Config.DeadLetter.Topic invalid Kafka topic name "no spaces": character ' ' at byte 2; only letters, digits, '.', '_' and '-' are allowed; or leave it empty for the default, topics.DeadLetter(consumer group)`,
		"middleware.Config.DeadLetter.MaxAttempts is negative (-1); use 0 for the default (5) or a positive count",
		"middleware.Config.DeadLetter.Backoff.Multiplier (0.5) is less than 1; use 0 for the default (2) or a value of at least 1",
	}
	const prefix = "invalid configuration: "
	if err == nil || err.Error() != prefix+strings.Join(want, "\n"+prefix) || !errors.Is(err, koto.ErrInvalidConfig) || !errors.Is(err, topics.ErrInvalid) {
		t.Errorf("Validate:\n got %v\nwant %s\nwrapping ErrInvalidConfig and topics.ErrInvalid", err, prefix+strings.Join(want, "\n"+prefix))
	}
}

// TestIdempotencyRejectsBadConfig: Idempotency returns its configuration
// error, every problem of it, instead of a middleware.
func TestIdempotencyRejectsBadConfig(t *testing.T) {
	mw, err := middleware.Idempotency(nil, middleware.IdempotencyConfig{StoreTimeout: -1})
	want := "invalid configuration: middleware.IdempotencyConfig.StoreTimeout is negative (-1ns); use 0 for the default (5s) or a positive duration\n" +
		"invalid configuration: middleware.IdempotencyConfig has no store: Idempotency got nil; pass an idempotency.Store, such as idempotency.NewMemoryStore or postgres.NewStore"
	if mw != nil || err == nil || err.Error() != want || !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("Idempotency(nil store, negative StoreTimeout) = %v, %v\nwant no middleware and %s", mw != nil, err, want)
	}
}

func TestZeroConfigsAreValid(t *testing.T) {
	if err := (middleware.DeadLetterConfig{}).Validate(); err != nil {
		t.Errorf("DeadLetterConfig{}: %v", err)
	}
	if err := (middleware.IdempotencyConfig{}).Validate(); err != nil {
		t.Errorf("IdempotencyConfig{}: %v", err)
	}
	if err := (koto.Backoff{}).Validate(); err != nil {
		t.Errorf("Backoff{}: %v", err)
	}
}
