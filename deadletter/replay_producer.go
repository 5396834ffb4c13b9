package deadletter

import (
	"errors"
	"fmt"

	"github.com/koto-dev/watermill-koto/internal/dlqmeta"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
)

// message is the record that replays l.
func (r *replayer) message(l *Letter) *sarama.ProducerMessage {
	from := fmt.Sprintf("%s/%d/%d", r.q.cfg.Topic, l.Partition, l.Offset)
	headers := make([]sarama.RecordHeader, 0, len(l.headers)+1)
	for _, h := range l.headers {
		if string(h.Key) != dlqmeta.ReplayedFrom {
			headers = append(headers, h)
		}
	}
	headers = append(headers, sarama.RecordHeader{Key: []byte(dlqmeta.ReplayedFrom), Value: []byte(from)})
	m := &sarama.ProducerMessage{Topic: l.OriginalTopic, Headers: headers, Metadata: l}
	if l.Key != nil {
		m.Key = sarama.ByteEncoder(l.Key)
	}
	if l.Payload != nil {
		m.Value = sarama.ByteEncoder(l.Payload)
	}
	return m
}

// failedMessages returns the messages of a SendMessages call that Kafka
// did not acknowledge: those in its ProducerErrors, or all for another
// error.
func failedMessages(msgs []*sarama.ProducerMessage, err error) map[*sarama.ProducerMessage]bool {
	failed := map[*sarama.ProducerMessage]bool{}
	if err == nil {
		return failed
	}
	var perrs sarama.ProducerErrors
	if !errors.As(err, &perrs) {
		for _, m := range msgs {
			failed[m] = true
		}
		return failed
	}
	for _, pe := range perrs {
		failed[pe.Msg] = true
	}
	return failed
}

// replayPartitioner sends a record back to the partition its dead letter
// was consumed from, when the topic still has it, and leaves the others to
// the services' partitioner: a replay lands where the consumer met the
// message, keyed or not, even when the partitioner has changed since. A
// record that a crash made the replay send twice lands twice on one
// partition, where the consumer meets the copies one after the other.
type replayPartitioner struct {
	keyed sarama.Partitioner
}

func (p replayPartitioner) Partition(m *sarama.ProducerMessage, n int32) (int32, error) {
	if l, ok := m.Metadata.(*Letter); ok && l.OriginalPartition >= 0 && l.OriginalPartition < n {
		return l.OriginalPartition, nil
	}
	return p.keyed.Partition(m, n)
}

func (p replayPartitioner) RequiresConsistency() bool { return true }

// newReplayProducer returns a producer configured as the services'
// publisher, with replayPartitioner around the services' partitioner.
func newReplayProducer(cfg broker.Config) (sarama.SyncProducer, error) {
	user := cfg.Sarama
	cfg.Sarama = func(sc *sarama.Config) {
		if user != nil {
			user(sc)
		}
		keyed := sc.Producer.Partitioner
		if keyed == nil {
			keyed = sarama.NewHashPartitioner
		}
		sc.Producer.Partitioner = func(topic string) sarama.Partitioner {
			return replayPartitioner{keyed: keyed(topic)}
		}
	}
	p, err := broker.NewProducer(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}
