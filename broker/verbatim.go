package broker

import (
	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// marshal returns the record of msg on topic: the record that its context
// marks it to be written as (koto.ContextWithVerbatim), such as a dead
// letter, byte for byte; otherwise what m maps it to.
func marshal(m kafka.Marshaler, topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	rec, ok := koto.VerbatimFromContext(msg.Context())
	if !ok {
		return m.Marshal(topic, msg)
	}
	out := &sarama.ProducerMessage{Topic: topic, Headers: make([]sarama.RecordHeader, len(rec.Headers))}
	for i, h := range rec.Headers {
		out.Headers[i] = sarama.RecordHeader{Key: h.Key, Value: h.Value}
	}
	if rec.Key != nil {
		out.Key = sarama.ByteEncoder(rec.Key)
	}
	if rec.Value != nil {
		out.Value = sarama.ByteEncoder(rec.Value)
	}
	return out, nil
}
