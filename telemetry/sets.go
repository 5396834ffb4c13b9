package telemetry

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
)

// setKey is what distinguishes the attribute sets of the delivery
// metrics.
type setKey struct {
	topic, group, outcome, errorType string
}

// setCache keeps the attribute set of each setKey, so that a delivery does
// not sort and allocate one. It grows with the number of series of the
// delivery metrics, which the meter provider keeps anyway.
type setCache struct {
	m sync.Map // setKey → attribute.Set
}

// of returns the set of k, made by build the first time.
func (c *setCache) of(k setKey, build func(setKey) attribute.Set) attribute.Set {
	if s, ok := c.m.Load(k); ok {
		return s.(attribute.Set)
	}
	s, _ := c.m.LoadOrStore(k, build(k))
	return s.(attribute.Set)
}
