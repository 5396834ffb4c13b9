package middleware

import (
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
)

// MessageErrors is the error of a batch handler that names the messages
// of its batch that failed, each with its error: they go their own way by
// their class (retried, dead-lettered, waited out), one at a time, and
// the others commit. Return it with [FailMessages].
type MessageErrors map[*message.Message]error

// Error lists how many messages failed and the first error.
func (e MessageErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d message(s) of the batch failed", len(e))
	for msg, err := range e {
		fmt.Fprintf(&b, ", e.g. %s: %v", msg.UUID, err)
		break
	}
	return b.String()
}

// FailMessages returns errs as a batch handler's error, or nil when errs
// is empty, so that a handler can end with return FailMessages(errs).
func FailMessages(errs map[*message.Message]error) error {
	if len(errs) == 0 {
		return nil
	}
	return MessageErrors(errs)
}
