package deadletter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
)

// ErrNotFound is wrapped by the error of [Queue.Show] for a position that
// holds no dead letter.
var ErrNotFound = errors.New("deadletter: no such dead letter")

// ErrNoTopic is wrapped by the error of List, Show, Replay and Discard
// when the dead-letter topic does not exist. Looking it up does not create
// it.
var ErrNoTopic = errors.New("deadletter: no such dead-letter topic")

// Queue is the dead-letter topic of one consumer group: [Queue.List],
// [Queue.Show], [Queue.Replay] and [Queue.Discard] its dead letters.
// Build it with [NewQueue]. It is safe for concurrent use, its calls
// reading the topic one at a time; run one Replay or Discard of a replay
// group at a time, though, in this process or another (see the package
// documentation).
type Queue struct {
	scanning sync.Mutex // a sarama consumer reads a partition once at a time
	cfg      Config
	reader   *broker.MappingReader
	client   sarama.Client // reads the topic
	consumer sarama.Consumer
	replay   replayGroup // with a client of its own: Kafka answers the requests of a connection in order, and the consumer's fetches wait there for records
}

// NewQueue connects to Kafka with cfg.Broker and returns the dead-letter
// topic of cfg.ConsumerGroup. An invalid cfg fails with an error that wraps
// koto.ErrInvalidConfig. Close the queue when done.
func NewQueue(cfg Config) (*Queue, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reader, err := broker.NewMappingReader(cfg.Mapping, cfg.Broker.Marshaler)
	if err != nil {
		return nil, err
	}
	client, err := broker.NewSaramaClient(readerConfig(cfg.Broker))
	if err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	groupClient, err := broker.NewSaramaClient(noTopicCreation(cfg.Broker))
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		_ = client.Close()
		_ = groupClient.Close()
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	return &Queue{
		cfg: cfg, reader: reader, client: client, consumer: consumer,
		replay: replayGroup{client: groupClient, group: cfg.ReplayGroup, topic: cfg.Topic},
	}, nil
}

// readMaxWait is how long a fetch of the reading client waits for
// records. A scan waits for the fetch under way before it ends, so it is
// shorter than sarama's default (500 ms).
const readMaxWait = 100 * time.Millisecond

// readTimeout bounds how long the reading client waits for an answer. A
// scan takes a partition whose records stop coming for tailGapWait to be
// at its end, so a broker that hangs must fail the read before that:
// otherwise a listing or a replay would end early, as if the topic held
// nothing more.
const readTimeout = tailGapWait / 2

// readerConfig is cfg for the client that reads the topic; Config.Sarama
// has the last word, but for creating topics, which a reader never does.
func readerConfig(cfg broker.Config) broker.Config {
	user := cfg.Sarama
	cfg.Sarama = func(sc *sarama.Config) {
		sc.Consumer.MaxWaitTime = readMaxWait
		sc.Net.ReadTimeout = readTimeout
		if user != nil {
			user(sc)
		}
	}
	return noTopicCreation(cfg)
}

// noTopicCreation is cfg for a client whose metadata requests never
// create a topic: a cluster with auto.create.topics.enable would otherwise
// create every dead-letter topic that a misspelt group names.
func noTopicCreation(cfg broker.Config) broker.Config {
	user := cfg.Sarama
	cfg.Sarama = func(sc *sarama.Config) {
		if user != nil {
			user(sc)
		}
		sc.Metadata.AllowAutoTopicCreation = false
	}
	return cfg
}

// Topic returns the dead-letter topic.
func (q *Queue) Topic() string { return q.cfg.Topic }

// ReplayGroup returns the consumer group that records replays.
func (q *Queue) ReplayGroup() string { return q.cfg.ReplayGroup }

// Close disconnects. Calling it twice is fine.
func (q *Queue) Close() error {
	err := q.consumer.Close()
	for _, c := range []sarama.Client{q.client, q.replay.client} {
		if cerr := c.Close(); cerr != nil && !errors.Is(cerr, sarama.ErrClosedClient) {
			err = errors.Join(err, cerr)
		}
	}
	return err
}

// List returns the dead letters that f selects, partition by partition in
// offset order, each with Replayed and Discarded set from the replay
// group. Payloads are
// included; for a large topic, narrow f or set f.Limit.
func (q *Queue) List(ctx context.Context, f Filter) ([]*Letter, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	ranges, err := q.ranges(ctx)
	if err != nil {
		return nil, err
	}
	done, err := q.replay.fetch(ctx, ranges.partitions())
	if err != nil {
		return nil, err
	}
	var out []*Letter
	err = q.scan(ctx, ranges, func(l *Letter) (bool, error) {
		if !f.Match(l) {
			return true, nil
		}
		pr := done[l.Partition]
		l.setResolved(&pr)
		out = append(out, l)
		return f.Limit == 0 || len(out) < f.Limit, nil
	})
	return out, err
}

// Ends returns the end offset of each partition of the topic: where a
// List or Replay that starts now stops reading. See ReplayOptions.Ends.
func (q *Queue) Ends(ctx context.Context) (map[int32]int64, error) {
	ranges, err := q.ranges(ctx)
	if err != nil {
		return nil, err
	}
	ends := make(map[int32]int64, len(ranges))
	for _, r := range ranges {
		ends[r.partition] = r.end
	}
	return ends, nil
}

// Show returns the dead letter at partition and offset of the topic, or an
// error wrapping [ErrNotFound]. Replayed and Discarded are set from the
// replay group.
func (q *Queue) Show(ctx context.Context, partition int32, offset int64) (*Letter, error) {
	ranges, err := q.ranges(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := ranges.of(partition)
	if !ok || offset < r.start || offset >= r.end {
		return nil, fmt.Errorf("%w at %s partition %d offset %d (the topic holds %s)", ErrNotFound, q.cfg.Topic, partition, offset, ranges)
	}
	r.start, r.end = offset, offset+1
	var found *Letter
	if err := q.scan(ctx, partitionRanges{r}, func(l *Letter) (bool, error) {
		if l.Offset == offset {
			found = l
		}
		return false, nil
	}); err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("%w at %s partition %d offset %d (no record there)", ErrNotFound, q.cfg.Topic, partition, offset)
	}
	done, err := q.replay.fetch(ctx, []int32{partition})
	if err != nil {
		return nil, err
	}
	pr := done[partition]
	found.setResolved(&pr)
	return found, nil
}
