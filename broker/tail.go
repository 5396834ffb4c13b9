package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/topics"
)

// TailReader reads a topic from its end without a consumer group: every
// partition from the newest offset at Start, each on a goroutine of its own
// that calls a function for every message. Build it with [NewTailReader].
//
// It suits messages meant for whoever listens now, such as replies: every
// reader of a topic gets every message, nothing is committed, and what was
// published before Start is not read. Messages reach the function with no
// ack to give and no extra hand-off between goroutines, which keeps a
// request/reply round trip short. Partitions added to the topic after Start
// are not read.
type TailReader struct {
	cfg    Config
	topic  string
	handle func(*message.Message)
	logger watermill.LoggerAdapter

	mu       sync.Mutex
	starting bool
	closed   bool
	tail     *tail          // set once started
	wg       sync.WaitGroup // start attempts and partition goroutines
}

// tail is what a started reader holds open.
type tail struct {
	client     sarama.Client
	consumer   sarama.Consumer
	partitions []sarama.PartitionConsumer
}

// NewTailReader returns a reader of topic that calls handle with each
// message, decoded by cfg.Marshaler; a message that does not decode is
// logged and skipped. handle runs on the partition's goroutine, so a slow
// handle delays the messages after it on that partition; it must not call
// Close. cfg.ConsumerGroup and cfg.InitialOffset are not used. A nil logger
// logs nothing. It does not connect until Start.
func NewTailReader(cfg Config, topic string, handle func(*message.Message), logger watermill.LoggerAdapter) (*TailReader, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := topics.Validate(topic); err != nil {
		return nil, fmt.Errorf("broker: tail reader: %w", err)
	}
	if handle == nil {
		return nil, fmt.Errorf("%w: tail reader of %s: the handle func is nil", ErrInvalidConfig, topic)
	}
	logger = orNop(logger).With(watermill.LogFields{"topic": topic})
	return &TailReader{cfg: cfg, topic: topic, handle: handle, logger: logger}, nil
}

// Start connects and starts reading every partition at its newest offset.
// It returns once each partition's offset is resolved: every message
// produced afterwards is read. The topic must exist or be auto-created by
// the cluster.
//
// ctx bounds only the start. When it ends first, Start returns its error
// and the connection under way is dropped in the background (Close waits
// for that); Start may then be called again. Start on a started or closed
// reader returns an error.
func (r *TailReader) Start(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return fmt.Errorf("broker: tail reader of %s is closed", r.topic)
	case r.tail != nil || r.starting:
		r.mu.Unlock()
		return fmt.Errorf("broker: tail reader of %s is already started", r.topic)
	}
	r.starting = true
	r.wg.Add(1)
	r.mu.Unlock()

	started, abandoned := make(chan error, 1), make(chan struct{})
	go func() {
		defer r.wg.Done()
		started <- r.connect(abandoned)
	}()
	select {
	case err := <-started:
		return err
	case <-ctx.Done():
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.tail != nil {
			return nil // it started as ctx ended
		}
		r.starting = false
		close(abandoned)
		return fmt.Errorf("broker: tail reader of %s: %w", r.topic, ctx.Err())
	}
}

// connect opens a tail and, unless the start was abandoned or the reader
// closed meanwhile, runs it.
func (r *TailReader) connect(abandoned <-chan struct{}) error {
	t, err := r.open()
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-abandoned:
		if t != nil {
			_ = t.close()
		}
		return nil
	default:
	}
	r.starting = false
	switch {
	case err != nil:
		return err
	case r.closed:
		_ = t.close()
		return fmt.Errorf("broker: tail reader of %s closed while starting", r.topic)
	}
	r.tail = t
	for _, pc := range t.partitions {
		r.wg.Add(1)
		go r.read(pc)
	}
	return nil
}

// open connects and starts one partition consumer per partition at its
// newest offset.
func (r *TailReader) open() (_ *tail, err error) {
	sc, err := r.cfg.subscriberSarama()
	if err != nil {
		return nil, err
	}
	t := &tail{}
	defer func() {
		if err != nil {
			_ = t.close()
		}
	}()
	if t.client, err = sarama.NewClient(r.cfg.Brokers, sc); err != nil {
		return nil, connectError(r.cfg, "tail reader of "+r.topic, err)
	}
	if t.consumer, err = sarama.NewConsumerFromClient(t.client); err != nil {
		return nil, fmt.Errorf("broker: tail reader of %s: %w", r.topic, err)
	}
	partitions, err := t.consumer.Partitions(r.topic)
	if err != nil {
		return nil, fmt.Errorf("broker: tail reader: partitions of %s: %w", r.topic, err)
	}
	for _, p := range partitions {
		pc, err := t.consumer.ConsumePartition(r.topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("broker: tail reader: partition %d of %s: %w", p, r.topic, err)
		}
		t.partitions = append(t.partitions, pc)
	}
	return t, nil
}

// read hands the messages of one partition to handle until its consumer
// closes.
func (r *TailReader) read(pc sarama.PartitionConsumer) {
	defer r.wg.Done()
	msgs, errs := pc.Messages(), pc.Errors()
	for msgs != nil || errs != nil {
		select {
		case rec, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			msg, err := r.cfg.Marshaler.Unmarshal(rec)
			if err != nil {
				r.logger.Error("Skipping a message that does not decode", err,
					watermill.LogFields{"partition": rec.Partition, "offset": rec.Offset})
				continue
			}
			r.handle(msg)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			r.logger.Error("Tail reader partition consumer error", err, nil)
		}
	}
}

// Close stops reading, waits for the partition goroutines and a start in
// the background, and disconnects. Calling it twice is fine.
func (r *TailReader) Close() error {
	r.mu.Lock()
	t := r.tail
	if r.closed {
		t = nil
	}
	r.closed = true
	r.mu.Unlock()
	if t != nil {
		for _, pc := range t.partitions {
			pc.AsyncClose()
		}
	}
	r.wg.Wait()
	if t == nil {
		return nil
	}
	return t.close()
}

// close closes what open opened. Errors of the partition consumers are
// left to their readers: they were logged, or nobody read them yet.
func (t *tail) close() error {
	for _, pc := range t.partitions {
		_ = pc.Close()
	}
	var errs []error
	if t.consumer != nil {
		errs = append(errs, t.consumer.Close())
	}
	if t.client != nil {
		if err := t.client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
