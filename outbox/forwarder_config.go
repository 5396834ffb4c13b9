package outbox

import (
	"log/slog"
	"time"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// Defaults of ForwarderConfig. A zero field means its default.
const (
	defaultBatchSize        = 1000
	defaultPollInterval     = time.Second
	defaultTakeoverInterval = time.Second
	defaultQueryTimeout     = 10 * time.Second
	defaultApplicationName  = "koto-outbox-forwarder"
	defaultRetention        = 7 * 24 * time.Hour
)

// ForwarderConfig configures a Forwarder. Every field but Broker.Brokers
// has a default.
type ForwarderConfig struct {
	// Broker is where messages go: the producer is the broker package's
	// (acks=all, idempotent, Broker.Sarama applied), and Broker.Marshaler
	// turns messages into records. Broker.Brokers is required.
	Broker broker.Config

	// BatchSize is the most rows read and produced at once; default
	// 1000. A crash re-sends at most one batch.
	BatchSize int

	// PollInterval is how long the forwarder waits for a notification
	// before it looks at the table anyway; default 1s. A
	// lost notification delays messages by at most this much.
	PollInterval time.Duration

	// TakeoverInterval is how often a standby forwarder tries to become
	// the active one; default 1s. When the active
	// forwarder dies, another takes over within about this much.
	TakeoverInterval time.Duration

	// QueryTimeout bounds every statement of the forwarder's connection;
	// default 10s. A connection that does not answer in
	// time is dropped and made again.
	QueryTimeout time.Duration

	// RetryBackoff spaces the attempts after a failure of PostgreSQL or
	// Kafka; zero fields mean koto.Backoff's defaults. Success resets
	// it.
	RetryBackoff koto.Backoff

	// ScheduleRetention is how long after its due time the forwarder
	// keeps what became of a scheduled message, sent or cancelled, for
	// Cancel's answer; default 7 days. Cancel
	// of an ID settled longer ago returns ErrUnknownSchedule.
	ScheduleRetention time.Duration

	// ApplicationName is the application_name of the forwarder's
	// PostgreSQL connection, as pg_stat_activity shows it; default
	// "koto-outbox-forwarder".
	ApplicationName string

	// Logger receives the forwarder's life: becoming active (info),
	// failures it retries (warn), rows it cannot read (error), batches
	// (debug); default slog.Default().
	Logger *slog.Logger

	// Telemetry receives the table's backlog, the gauges of
	// [Outbox.Status], while Run runs (see Status and metrics in the
	// package documentation). Nil: OpenTelemetry's global meter provider,
	// which costs nothing until the application sets one.
	Telemetry *telemetry.Telemetry
}

func (c *ForwarderConfig) setDefaults() {
	if c.BatchSize == 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.TakeoverInterval == 0 {
		c.TakeoverInterval = defaultTakeoverInterval
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = defaultQueryTimeout
	}
	if c.ScheduleRetention == 0 {
		c.ScheduleRetention = defaultRetention
	}
	if c.ApplicationName == "" {
		c.ApplicationName = defaultApplicationName
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every field that cannot work, Broker and RetryBackoff
// included, in one error that wraps koto.ErrInvalidConfig. Zero fields
// count as their defaults. NewForwarder calls it.
func (c ForwarderConfig) Validate() error {
	c.setDefaults()
	p := config.For("outbox.ForwarderConfig")
	p.Nest("Broker", c.Broker.Validate())
	if c.BatchSize < 0 {
		p.Add("BatchSize", "is %d; set a positive number of rows, or 0 for %d", c.BatchSize, defaultBatchSize)
	}
	for _, d := range []struct {
		name      string
		value, to time.Duration
	}{
		{"PollInterval", c.PollInterval, defaultPollInterval},
		{"TakeoverInterval", c.TakeoverInterval, defaultTakeoverInterval},
		{"QueryTimeout", c.QueryTimeout, defaultQueryTimeout},
		{"ScheduleRetention", c.ScheduleRetention, defaultRetention},
	} {
		if d.value < 0 {
			p.Add(d.name, "is %v; set a positive duration, or 0 for %v", d.value, d.to)
		}
	}
	p.Nest("RetryBackoff", c.RetryBackoff.Validate())
	return p.Err()
}
