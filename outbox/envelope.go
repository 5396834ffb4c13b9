package outbox

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/topics"
)

// envelope is the payload of an outbox row: the message and its
// destination topic, in the JSON format of Watermill's components/forwarder
// (destination_topic, uuid, payload as base64, metadata), so that
// Watermill's own forwarder reads an outbox table as well.
type envelope struct {
	DestinationTopic string            `json:"destination_topic"`
	UUID             string            `json:"uuid"`
	Payload          []byte            `json:"payload"`
	Metadata         map[string]string `json:"metadata"`
}

func wrap(topic string, msg *message.Message) ([]byte, error) {
	return json.Marshal(envelope{
		DestinationTopic: topic,
		UUID:             msg.UUID,
		Payload:          msg.Payload,
		Metadata:         msg.Metadata,
	})
}

// errBadEnvelope is wrapped by unwrap's errors.
var errBadEnvelope = errors.New("outbox row is not a message envelope")

// unwrap returns the destination topic and the message of a row's payload.
func unwrap(payload []byte) (string, *message.Message, error) {
	var e envelope
	if err := json.Unmarshal(payload, &e); err != nil {
		return "", nil, fmt.Errorf("%w: %w", errBadEnvelope, err)
	}
	if e.DestinationTopic == "" {
		return "", nil, fmt.Errorf("%w: no destination_topic", errBadEnvelope)
	}
	// Kafka would refuse the record, and the forwarder would retry it for
	// ever; the Publisher never writes such a row, another writer may.
	if err := topics.Validate(e.DestinationTopic); err != nil {
		return "", nil, fmt.Errorf("%w: destination_topic: %w", errBadEnvelope, err)
	}
	msg := message.NewMessage(e.UUID, e.Payload)
	if e.Metadata != nil {
		msg.Metadata = e.Metadata
	}
	return e.DestinationTopic, msg, nil
}
