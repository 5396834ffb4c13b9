package embedded

import (
	"errors"
	"fmt"

	"github.com/koto-dev/watermill-koto/topics"
)

// ErrInvalidOption is wrapped by the error that [Start] returns for an option
// value it cannot use.
var ErrInvalidOption = errors.New("embedded: invalid option")

func (c config) validate() error {
	if c.partitions < 1 {
		return fmt.Errorf("%w: WithPartitions(%d): the partition count must be at least 1", ErrInvalidOption, c.partitions)
	}
	if c.port < 0 || c.port > 65535 {
		return fmt.Errorf("%w: WithPort(%d): use 0 for a free port or a port in 1..65535", ErrInvalidOption, c.port)
	}
	for _, t := range c.topics {
		if err := topics.Validate(t); err != nil {
			return fmt.Errorf("%w: WithTopics: %w", ErrInvalidOption, err)
		}
	}
	return nil
}
