package console

// Every call the console makes into deadletter, outbox and broker is in
// this file, so that it follows their renames in a few lines.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/internal/offsets"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
	"github.com/koto-dev/watermill-koto/topics"
)

type (
	letter         = deadletter.Letter
	filter         = deadletter.Filter
	position       = deadletter.Position
	queue          = deadletter.Queue
	replayResult   = deadletter.ReplayResult
	replayProgress = deadletter.ReplayProgress
	replayOptions  = deadletter.ReplayOptions
	outboxStatus   = outbox.Status
	parkedStatus   = parking.Status
	parkedEntry    = parking.Entry
)

const (
	// defaultOutboxSchema is outbox.Config's default Schema.
	defaultOutboxSchema = "koto"
	// replayGroupSuffix ends the default replay group of deadletter.Config.
	replayGroupSuffix = ".dlq-replay"
)

// dlqSuffix ends every dead-letter topic: topics.DeadLetter(group).
var dlqSuffix = strings.TrimPrefix(topics.DeadLetter("g"), "g")

func deadLetterTopic(group string) string { return topics.DeadLetter(group) }

// readTimeout bounds each Kafka answer the console waits for, so that a
// page fails rather than hangs on a broker that does not answer.
const readTimeout = 5 * time.Second

// newOffsetReader connects the client that reads groups and offsets.
func newOffsetReader(cfg broker.Config) (*offsets.Reader, error) {
	client, err := broker.NewSaramaClient(readerConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	r, err := offsets.NewReader(client)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return r, nil
}

// openQueue opens the dead-letter topic of group, read as cfg says.
func openQueue(cfg Config, group string) (*queue, error) {
	return deadletter.NewQueue(deadletter.Config{Broker: readerConfig(cfg.Broker), Mapping: cfg.Mapping, ConsumerGroup: group})
}

// parsePosition reads a dead letter's position, PARTITION/OFFSET.
func parsePosition(s string) (position, error) { return deadletter.ParsePosition(s) }

// readerConfig is cfg for the console's clients, which only read: they
// create no topic by asking for it, and give up on a broker that does not
// answer. Config.Sarama still has the last word.
func readerConfig(cfg broker.Config) broker.Config {
	user := cfg.Sarama
	cfg.Sarama = func(sc *sarama.Config) {
		sc.Net.ReadTimeout = readTimeout
		sc.Metadata.AllowAutoTopicCreation = false
		if user != nil {
			user(sc)
		}
	}
	return cfg
}

// maskReason masks the variable parts of a reason, as a cause reads it.
func maskReason(reason string) string { return deadletter.MaskReason(reason) }

// causeOf names the cause of a failure of class with reason.
func causeOf(class, reason string) string { return deadletter.CauseOf(class, reason) }

func listLetters(ctx context.Context, q *queue, f filter) ([]*letter, error) {
	return q.List(ctx, f)
}

func showLetter(ctx context.Context, q *queue, partition int32, offset int64) (*letter, error) {
	return q.Show(ctx, partition, offset)
}

// isNotFound reports the error of showLetter for a position that holds
// no dead letter.
func isNotFound(err error) bool { return errors.Is(err, deadletter.ErrNotFound) }

// resolve runs deadletter's Replay, or its Discard.
func resolve(ctx context.Context, q *queue, k jobKind, f filter, opts replayOptions) (replayResult, error) {
	if k == kindDiscard {
		return q.Discard(ctx, f, opts)
	}
	return q.Replay(ctx, f, opts)
}

// endsOf returns the end offset of each partition of q's topic.
func endsOf(ctx context.Context, q *queue) (map[int32]int64, error) {
	return q.Ends(ctx)
}

// sentTo returns the topics that p says its dead letters went to, one
// entry per dead letter.
func sentTo(p replayProgress) []string {
	out := make([]string, len(p.Sent))
	for i, r := range p.Sent {
		out[i] = r.ToTopic
	}
	return out
}

// outboxStatuses reads the status of every outbox table of schemas.
func outboxStatuses(ctx context.Context, pool *pgxpool.Pool, schemas []string) ([]outboxStatus, error) {
	var out []outboxStatus
	for _, schema := range schemas {
		cfgs, err := outbox.FindTables(ctx, pool, schema)
		if err != nil {
			return out, err
		}
		for _, cfg := range cfgs {
			box, err := outbox.New(pool, cfg)
			if err != nil {
				return out, err
			}
			st, err := box.Status(ctx)
			if err != nil {
				return out, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// parkingStores returns the store of every parking table of schemas, each
// on the default outbox table of its schema, which brings back what it
// runs or dead-letters.
func parkingStores(ctx context.Context, pool *pgxpool.Pool, schemas []string) ([]*parking.Store, error) {
	var out []*parking.Store
	for _, schema := range schemas {
		cfgs, err := parking.FindTables(ctx, pool, schema)
		if err != nil {
			return out, err
		}
		box, err := outbox.New(pool, outbox.Config{Schema: schema})
		if err != nil {
			return out, err
		}
		for _, cfg := range cfgs {
			s, err := parking.NewStore(pool, box, cfg)
			if err != nil {
				return out, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// parkedStatuses reads what every parking table of schemas holds, per
// consumer group.
func parkedStatuses(ctx context.Context, pool *pgxpool.Pool, schemas []string) ([]parkedStatus, error) {
	stores, err := parkingStores(ctx, pool, schemas)
	var out []parkedStatus
	for _, s := range stores {
		st, serr := s.Status(ctx)
		out, err = append(out, st...), errors.Join(err, serr)
	}
	return out, err
}

// isNotParked reports the error of a run or dead letter of an ID that
// no parking table holds.
func isNotParked(err error) bool { return errors.Is(err, parking.ErrNotParked) }

// isNotFirst reports the error of a run or dead letter of a message that
// waits behind another of its key.
func isNotFirst(err error) bool { return errors.Is(err, parking.ErrNotFirst) }
