package cqrs

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
)

// replyReader reads every partition of a reply topic from its newest
// offset, without a consumer group, and hands each reply to deliver on the
// partition's own goroutine. It uses sarama directly rather than a
// watermill-kafka subscriber: a reply needs no ack, no per-message context
// and no extra hand-off between goroutines, and every microsecond here is
// on the request's critical path.
type replyReader struct {
	client    sarama.Client
	consumer  sarama.Consumer
	partConss []sarama.PartitionConsumer
	wg        sync.WaitGroup
}

// startReplyReader connects, starts one partition consumer per partition of
// topic at its newest offset and returns once all of them have resolved
// that offset: every reply produced afterwards is read.
func startReplyReader(cfg broker.Config, topic string, logger *slog.Logger, deliver func(*message.Message)) (_ *replyReader, err error) {
	sc, err := replySarama(cfg)
	if err != nil {
		return nil, err
	}
	unmarshaler := kafka.Unmarshaler(cfg.Marshaler)
	if unmarshaler == nil {
		unmarshaler = broker.NewPartitionKeyMarshaler()
	}
	r := &replyReader{}
	defer func() {
		if err != nil {
			_ = r.Close()
		}
	}()
	if r.client, err = sarama.NewClient(cfg.Brokers, sc); err != nil {
		return nil, fmt.Errorf("cqrs: reply reader: connecting to %v: %w", cfg.Brokers, err)
	}
	if r.consumer, err = sarama.NewConsumerFromClient(r.client); err != nil {
		return nil, fmt.Errorf("cqrs: reply reader: %w", err)
	}
	partitions, err := r.consumer.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("cqrs: reply reader: partitions of %s: %w", topic, err)
	}
	for _, p := range partitions {
		pc, err := r.consumer.ConsumePartition(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("cqrs: reply reader: partition %d of %s: %w", p, topic, err)
		}
		r.partConss = append(r.partConss, pc)
	}
	for _, pc := range r.partConss {
		r.wg.Add(1)
		go r.read(pc, unmarshaler, logger, deliver)
	}
	return r, nil
}

// read delivers the replies of one partition until its consumer closes.
func (r *replyReader) read(pc sarama.PartitionConsumer, unmarshaler kafka.Unmarshaler, logger *slog.Logger, deliver func(*message.Message)) {
	defer r.wg.Done()
	msgs, errs := pc.Messages(), pc.Errors()
	for msgs != nil || errs != nil {
		select {
		case rec, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			msg, err := unmarshaler.Unmarshal(rec)
			if err != nil {
				logger.Warn("dropping a reply that does not decode", "partition", rec.Partition, "offset", rec.Offset, "error", err)
				continue
			}
			deliver(msg)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			logger.Warn("reply consumer error", "error", err)
		}
	}
}

// Close stops the partition consumers, waits for their goroutines and
// closes the client.
func (r *replyReader) Close() error {
	for _, pc := range r.partConss {
		pc.AsyncClose()
	}
	r.wg.Wait()
	var errs []error
	if r.consumer != nil {
		errs = append(errs, r.consumer.Close())
	}
	if r.client != nil {
		if err := r.client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// replySarama is the sarama configuration of a reply reader: the broker
// package's consumer configuration for cfg, hook included, reading from the
// newest offset whatever the hook said.
func replySarama(cfg broker.Config) (*sarama.Config, error) {
	sc, err := broker.SaramaConsumerConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: reply reader: %w", ErrInvalidConfig, err)
	}
	sc.Consumer.Offsets.Initial = sarama.OffsetNewest
	return sc, nil
}
