package cqrs

import (
	"fmt"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/topics"
)

// Route sends every message of one type to an explicit topic instead of the
// conventional one.
type Route struct {
	// TypeName is the message type's name, as topics.TypeName gives it.
	TypeName string
	// Topic is the Kafka topic the type goes to.
	Topic string
}

// RouteOf returns the Route that sends messages of type T to topic:
//
//	cqrs.RouteOf[OrderPlacedEvent]("orders.order-placed.v2")
func RouteOf[T any](topic string) Route {
	return Route{TypeName: topics.TypeName(new(T)), Topic: topic}
}

// validate checks that the route names a type and a valid topic.
func (r Route) validate() error {
	if r.TypeName == "" {
		return fmt.Errorf("%w: route to %q has no type name", ErrInvalidRoute, r.Topic)
	}
	if err := topics.Validate(r.Topic); err != nil {
		return fmt.Errorf("%w: route of %s: %w", ErrInvalidRoute, r.TypeName, err)
	}
	return nil
}

// invalidRoute is the configuration error of a route, reply topic,
// consumer topic or consumer group that gives no valid topic: it wraps
// koto.ErrInvalidConfig and ErrInvalidRoute.
func invalidRoute(format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{koto.ErrInvalidConfig, ErrInvalidRoute}, args...)...)
}

// routeTable validates routes and indexes them by type name; its errors
// wrap ErrInvalidRoute. Two routes of
// one type to different topics are an error.
func routeTable(routes []Route) (map[string]string, error) {
	table := make(map[string]string, len(routes))
	for _, r := range routes {
		if err := r.validate(); err != nil {
			return nil, err
		}
		if prev, ok := table[r.TypeName]; ok && prev != r.Topic {
			return nil, fmt.Errorf("%w: %s is routed to both %q and %q", ErrInvalidRoute, r.TypeName, prev, r.Topic)
		}
		table[r.TypeName] = r.Topic
	}
	return table, nil
}
