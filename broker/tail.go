package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/koto-dev/watermill-koto/internal/retry"

	"github.com/koto-dev/watermill-koto/internal/wmlog"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/topics"
)

// resumeSkew is how far before the last record it read a tail reader
// resumes a partition, so that records of producers whose clocks lag are
// not skipped.
const resumeSkew = 10 * time.Second

// TailReader reads a topic from its end without a consumer group: every
// partition from the newest offset at Start, each on a goroutine of its own
// that calls a function for every message. Build it with [NewTailReader].
//
// It suits messages meant for whoever listens now, such as replies: every
// reader of a topic gets every message, nothing is committed, and what was
// published before Start is not read (but for the few seconds before it,
// when a partition is resumed). Messages reach the function with no
// ack to give and no extra hand-off between goroutines, which keeps a
// request/reply round trip short. Partitions added to the topic after Start
// are not read. A partition that stops being read is resumed by the reader
// itself, and [TailReader.Err] says meanwhile why it cannot read (see the
// package documentation).
type TailReader struct {
	cfg    Config
	topic  string
	handle func(*message.Message)
	logger watermill.LoggerAdapter

	life context.Context // ends at Close, and every connection with it
	stop context.CancelFunc

	health atomic.Pointer[error] // what Err returns; nil while all is read

	mu     sync.Mutex
	state  tailState
	down   map[int32]error // partitions that cannot be read, and why
	tail   *tail           // set once started
	wg     sync.WaitGroup  // a Start under way and the partition goroutines
	endRun context.CancelFunc
}

type tailState int

const (
	tailNew tailState = iota
	tailStarting
	tailRunning
	tailClosed
)

// tail is what a started reader holds open besides its partitions.
type tail struct {
	client   sarama.Client
	consumer sarama.Consumer
}

// NewTailReader returns a reader of topic that calls handle with each
// message, decoded by cfg.Marshaler; a message that does not decode is
// logged and skipped. handle runs on the partition's goroutine, so a slow
// handle delays the messages after it on that partition; it must not call
// Close. cfg.ConsumerGroup and cfg.InitialOffset are not used;
// cfg.ReconnectRetrySleep spaces the attempts to resume a partition. It does
// not connect until Start.
func NewTailReader(cfg Config, topic string, handle func(*message.Message)) (*TailReader, error) {
	cfg.setDefaults()
	p := config.For("broker.Config")
	cfg.validate(p)
	if err := topics.Validate(topic); err != nil {
		p.Add("", "cannot read topic %q: %w", topic, err)
	}
	if handle == nil {
		p.Add("", "cannot read topic %q: the handle func is nil", topic)
	}
	if err := p.Err(); err != nil {
		return nil, fmt.Errorf("broker: tail reader: %w", err)
	}
	logger := wmlog.Business(cfg.Logger).With(watermill.LogFields{"topic": topic})
	r := &TailReader{cfg: cfg, topic: topic, handle: handle, logger: logger, down: map[int32]error{}}
	r.life, r.stop = context.WithCancel(context.Background())
	r.updateHealth()
	return r, nil
}

// Start connects and starts reading every partition at its newest offset.
// It returns once each partition's offset is resolved: every message
// produced afterwards is read. The topic must exist or be auto-created by
// the cluster.
//
// ctx bounds only the start: when it ends first, the connection under way
// is dropped at once and Start returns ctx's error; Start may then be called
// again. Close during Start makes it return promptly. Start on a started or
// closed reader returns an error.
func (r *TailReader) Start(ctx context.Context) error {
	r.mu.Lock()
	switch r.state {
	case tailClosed:
		r.mu.Unlock()
		return fmt.Errorf("broker: tail reader of %s is closed", r.topic)
	case tailStarting, tailRunning:
		r.mu.Unlock()
		return fmt.Errorf("broker: tail reader of %s is already started", r.topic)
	}
	r.state = tailStarting
	r.wg.Add(1)
	r.mu.Unlock()
	defer r.wg.Done()

	run, endRun := context.WithCancel(r.life)
	abandon := context.AfterFunc(ctx, endRun)
	t, partitions, err := r.open(run)
	if err == nil && !abandon() {
		err = errors.New("start abandoned") // ctx ended as the start succeeded
	}
	if err == nil {
		if err = r.run(t, partitions, endRun); err == nil {
			return nil
		}
	}
	endRun()
	if t != nil {
		_ = t.close(partitions)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.state == tailClosed:
		return fmt.Errorf("broker: tail reader of %s closed while starting: %w", r.topic, err)
	case ctx.Err() != nil:
		err = fmt.Errorf("broker: tail reader of %s: %w", r.topic, ctx.Err())
	}
	r.state = tailNew
	return err
}

// run makes the reader read the partitions of t from now on, unless it
// was closed meanwhile.
func (r *TailReader) run(t *tail, partitions map[int32]sarama.PartitionConsumer, endRun context.CancelFunc) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == tailClosed {
		return errors.New("closed")
	}
	r.tail, r.endRun, r.state = t, endRun, tailRunning
	r.updateHealth()
	now := time.Now()
	for p, pc := range partitions {
		r.wg.Add(1)
		go r.follow(p, pc, now)
	}
	return nil
}

// open connects with connections that close when ctx ends, and starts one
// partition consumer per partition at its newest offset.
func (r *TailReader) open(ctx context.Context) (_ *tail, _ map[int32]sarama.PartitionConsumer, err error) {
	sc, err := r.cfg.subscriberSarama()
	if err != nil {
		return nil, nil, err
	}
	bindToContext(ctx, sc)
	t := &tail{}
	partitions := map[int32]sarama.PartitionConsumer{}
	defer func() {
		if err != nil {
			_ = t.close(partitions)
		}
	}()
	if t.client, err = sarama.NewClient(r.cfg.Brokers, sc); err != nil {
		return nil, nil, connectError(r.cfg, "tail reader of "+r.topic, err)
	}
	if t.consumer, err = sarama.NewConsumerFromClient(t.client); err != nil {
		return nil, nil, fmt.Errorf("broker: tail reader of %s: %w", r.topic, err)
	}
	ids, err := t.consumer.Partitions(r.topic)
	if err != nil {
		return nil, nil, fmt.Errorf("broker: tail reader: partitions of %s: %w", r.topic, err)
	}
	for _, p := range ids {
		pc, err := t.consumer.ConsumePartition(r.topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, nil, fmt.Errorf("broker: tail reader: partition %d of %s: %w", p, r.topic, err)
		}
		partitions[p] = pc
	}
	return t, partitions, nil
}

// follow reads partition p, resuming it whenever its consumer stops, until
// the reader closes. since is when the reading started.
func (r *TailReader) follow(p int32, pc sarama.PartitionConsumer, since time.Time) {
	defer r.wg.Done()
	for pc != nil {
		var cause error
		since, cause = r.drain(pc, since)
		_ = pc.Close() // already stopped; its errors were drained
		if r.life.Err() != nil {
			return
		}
		pc = r.resume(p, since, cause)
	}
}

// drain hands the messages of pc to handle until pc stops, and returns the
// latest record timestamp (or since) and the last error pc reported. sarama
// stops a partition consumer for good when its offset is out of range:
// the topic was recreated, or records were deleted or truncated.
func (r *TailReader) drain(pc sarama.PartitionConsumer, since time.Time) (time.Time, error) {
	msgs, errs, closing := pc.Messages(), pc.Errors(), r.life.Done()
	var last error
	for msgs != nil || errs != nil {
		select {
		case <-closing:
			pc.AsyncClose()
			closing = nil
		case rec, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			if rec.Timestamp.After(since) {
				since = rec.Timestamp
			}
			r.deliver(rec)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			last = err
			if r.life.Err() == nil { // errors of connections closed by Close are no news
				r.logger.Error("Tail reader partition consumer error", err, nil)
			}
		}
	}
	return since, last
}

func (r *TailReader) deliver(rec *sarama.ConsumerMessage) {
	msg, err := r.cfg.Marshaler.Unmarshal(rec)
	if err != nil {
		r.logger.Error("Skipping a message that does not decode", err,
			watermill.LogFields{"partition": rec.Partition, "offset": rec.Offset})
		return
	}
	r.handle(msg)
}

// resume consumes partition p again from the first record written since
// since (the latest record read, or Start when none was) less resumeSkew,
// or from the newest offset when there is none, retrying every
// cfg.ReconnectRetrySleep. Meanwhile Err reports the partition. It returns
// nil when the reader closes first.
func (r *TailReader) resume(p int32, since time.Time, cause error) sarama.PartitionConsumer {
	if cause == nil {
		cause = errors.New("partition consumer stopped")
	}
	fields := watermill.LogFields{"partition": p}
	r.logger.Error("Tail reader stopped reading a partition; resuming it", cause, fields)
	r.setDown(p, cause)
	stopped := time.Now()
	var pc sarama.PartitionConsumer
	pause := func(int) time.Duration { return max(r.cfg.ReconnectRetrySleep, 0) }
	err := retry.Do(r.life, pause, func() error {
		offset, err := r.offsetSince(p, since.Add(-resumeSkew))
		if err == nil {
			pc, err = r.tail.consumer.ConsumePartition(r.topic, p, offset)
		}
		return err
	}, func(f retry.Failure) error {
		r.setDown(p, fmt.Errorf("%w (resuming failed: %w)", cause, f.Err))
		r.logger.Debug("Tail reader could not resume a partition yet",
			watermill.LogFields{"partition": p, "attempts": f.Retry, "error": f.Err.Error()})
		return nil
	}, nil)
	if err != nil {
		return nil // the reader closed
	}
	r.setDown(p, nil)
	r.logger.Info("Tail reader resumed reading a partition", watermill.LogFields{
		"partition": p, "down_for": time.Since(stopped).String(),
	})
	return pc
}

// offsetSince returns the offset of the first record of partition p
// written at or after t, or the newest offset when there is none. The
// newest offset is read first, so that no record lands between the two.
func (r *TailReader) offsetSince(p int32, t time.Time) (int64, error) {
	newest, err := r.tail.client.GetOffset(r.topic, p, sarama.OffsetNewest)
	if err != nil {
		return 0, err
	}
	offset, err := r.tail.client.GetOffset(r.topic, p, t.UnixMilli())
	switch {
	case err != nil:
		return 0, err
	case offset < 0:
		return newest, nil
	}
	return offset, nil
}

// Err returns nil while the reader reads every partition of its topic,
// and otherwise an error that wraps ErrReaderDown and says why: not
// started, closed, or a partition that cannot be read, with the cause
// (such as sarama.ErrOffsetOutOfRange while the reader resumes a partition
// of a recreated topic). It is cheap enough to call before each use.
func (r *TailReader) Err() error {
	if err := r.health.Load(); err != nil {
		return *err
	}
	return nil
}

// setDown records that partition p cannot be read because of err, or can
// again when err is nil.
func (r *TailReader) setDown(p int32, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.down, p)
	} else {
		r.down[p] = err
	}
	r.updateHealth()
}

// updateHealth sets what Err returns; r.mu is held.
func (r *TailReader) updateHealth() {
	var err error
	switch r.state {
	case tailNew, tailStarting:
		err = fmt.Errorf("%w: %s: not started", ErrReaderDown, r.topic)
	case tailClosed:
		err = fmt.Errorf("%w: %s: closed", ErrReaderDown, r.topic)
	default:
		if len(r.down) > 0 {
			p := slices.Min(slices.Collect(maps.Keys(r.down)))
			err = fmt.Errorf("%w: partition %d of %s: %w", ErrReaderDown, p, r.topic, r.down[p])
		}
	}
	if err == nil {
		r.health.Store(nil)
		return
	}
	r.health.Store(&err)
}

// Close stops reading: it drops every connection, so that a Start under way
// returns at once, waits for the partition goroutines and disconnects.
// Calling it twice is fine.
func (r *TailReader) Close() error {
	r.mu.Lock()
	if r.state == tailClosed {
		r.mu.Unlock()
		return nil
	}
	r.state = tailClosed
	r.updateHealth()
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
	r.mu.Lock()
	t, endRun := r.tail, r.endRun
	r.tail = nil
	r.mu.Unlock()
	if endRun != nil {
		endRun()
	}
	if t == nil {
		return nil
	}
	return t.close(nil)
}

// close closes what open opened: the partition consumers given, the
// consumer and the client. Errors of the partition consumers are left to
// their readers: they were logged, or nobody read them yet.
func (t *tail) close(partitions map[int32]sarama.PartitionConsumer) error {
	for _, pc := range partitions {
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
