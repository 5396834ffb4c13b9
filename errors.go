package koto

import (
	"errors"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// ErrInvalidConfig is wrapped by every error that rejects a configuration,
// in every package: the Validate methods and the constructors that call
// them. Test for it with errors.Is; the text names each field and says
// what to change.
var ErrInvalidConfig = config.ErrInvalid

// ErrMessageTooLarge is wrapped by the error of a publish that the broker,
// or the producer's own limit, refused because the message is too large.
var ErrMessageTooLarge = errors.New("message too large for the topic")

// ErrInvalidRecord is wrapped by the error of a message whose record its
// mapping could not read ([InvalidRecord]).
var ErrInvalidRecord = errors.New("invalid record")
