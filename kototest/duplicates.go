package kototest

import "github.com/ThreeDotsLabs/watermill/message"

// WithDuplicates returns originals with, after each message i for which
// dup(i) holds, a re-publication ([Republish]) of message i/2: a stream in
// which some messages come again later on their partition, as Kafka
// redelivers them.
func WithDuplicates(originals []*message.Message, dup func(i int) bool) []*message.Message {
	stream := make([]*message.Message, 0, len(originals))
	for i, m := range originals {
		stream = append(stream, m)
		if dup(i) {
			stream = append(stream, Republish(originals[i/2]))
		}
	}
	return stream
}

// Republish returns a new message with the UUID, payload and metadata of m,
// as a producer that sends m again does.
func Republish(m *message.Message) *message.Message {
	c := message.NewMessage(m.UUID, m.Payload)
	for k, v := range m.Metadata {
		c.Metadata.Set(k, v)
	}
	return c
}
