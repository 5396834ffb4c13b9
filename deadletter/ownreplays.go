package deadletter

import (
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/koto-dev/watermill-koto/internal/dlqmeta"

	"github.com/koto-dev/watermill-koto/middleware"
)

// OnlyOwnReplays returns router middleware that acks, without calling the
// handler, a message that a replay sent back for another consumer group:
// one with the dead_letter_replayed_from metadata, consumed from the topic that its
// dlqmeta.OriginalTopic names (so not a copy that a handler
// forwarded elsewhere), whose dlqmeta.ConsumerGroup is not
// the group of this handler. group returns the consumer group of a message;
// nil means middleware.HandlerName, the project's convention.
//
// A replay goes to the original topic, which every consumer group of that
// topic reads. Add it to the handlers of the groups that did not fail the
// message, so that they do not depend on their idempotency window to skip
// it; put it before the middleware.Defaults chain.
func OnlyOwnReplays(group func(msg *message.Message) string) message.HandlerMiddleware {
	if group == nil {
		group = middleware.HandlerName
	}
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			if replayedForOthers(msg, group) {
				return nil, nil
			}
			return h(msg)
		}
	}
}

func replayedForOthers(msg *message.Message, group func(*message.Message) string) bool {
	md := msg.Metadata
	failed := md.Get(dlqmeta.ConsumerGroup)
	return md.Get(dlqmeta.ReplayedFrom) != "" && failed != "" &&
		md.Get(dlqmeta.OriginalTopic) == message.SubscribeTopicFromCtx(msg.Context()) &&
		failed != group(msg)
}
