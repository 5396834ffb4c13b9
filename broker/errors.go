package broker

import "errors"

// Sentinel errors, wrapped by the errors of this package that add the
// details; test for them with errors.Is.
var (
	// ErrNoBrokers means Config.Brokers or ProvisionConfig.Brokers is empty.
	ErrNoBrokers = errors.New("broker: no Kafka brokers configured")
	// ErrNoConsumerGroup means NewSubscriber got an empty Config.ConsumerGroup.
	ErrNoConsumerGroup = errors.New("broker: no consumer group configured")
	// ErrInvalidTopic means a topic name breaks Kafka's naming rules. It
	// also wraps topics.ErrInvalid.
	ErrInvalidTopic = errors.New("broker: invalid topic")
	// ErrInvalidConfig means another configuration field has a value this
	// package cannot use; the message names the field.
	ErrInvalidConfig = errors.New("broker: invalid configuration")
)
