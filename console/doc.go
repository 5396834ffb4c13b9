// Package console is the operations console of a watermill-koto
// deployment, an http.Handler: what is failing and why, how far behind
// each consumer is, the outbox backlog, and the replay of fixed messages
// (or the discard of those that must never be replayed).
// A service mounts it on its admin server,
//
//	h, err := console.NewHandler(console.Config{Broker: brokerCfg, Pool: pool})
//	...
//	defer h.Close()
//	mux.Handle("/koto/", http.StripPrefix("/koto", h))
//
// and the koto command serves it alone (koto console). In the library's
// layers (README, Architecture) it composes broker, deadletter, outbox and
// parking.
//
// # Pages
//
// The overview shows each consumer group with its total and per-partition
// lag (the end offset of each partition it has committed on, minus its
// committed offset), how many records its dead-letter topic holds and when
// the newest failed; and each outbox table of Config.OutboxSchemas with
// outbox.Status's figures: rows waiting, rows held behind an open
// transaction, lag, the messages scheduled and when the next is due, and
// the active forwarder; and the messages parked in the parking tables of
// those schemas (package parking), per table and consumer group: keys,
// messages, the oldest and the next due. Its charts are of the last
// hour, as the console sampled it every Config.SampleInterval since it
// started: nothing is stored elsewhere.
//
// The consumer groups are Config.Groups, or else found: every group the
// cluster lists, but the replay groups ("<group>.dlq-replay"), and the
// group of every dead-letter topic ("<group>.dlq"), so that a consumer
// that is down, or whose offsets expired, still shows with its dead
// letters.
//
// A group's page groups its dead letters by cause (deadletter's
// Letter.Cause): the same error class, and the same reason once its
// variable parts (UUIDs, times, quoted values, numbers that are not part
// of a word) are masked, newest first. A cause leads to the list of its
// dead letters, which filters by time, type, UUID, correlation ID, class
// and reason text, and each dead letter shows whole: its mapping, UUID,
// type and correlation ID, its metadata, its payload (indented when JSON,
// as text, or as a hex dump), where it was consumed from and whether it
// was replayed or discarded. Dead letters are read in the record mapping
// each one's headers show, whatever the services publish in
// (deadletter.Config.Mapping; Config.Mapping reads them all in one). The
// grouped view and the list read at most Config.ListLimit dead letters,
// and say so when there are more.
//
// A group's parked page lists its parked messages, each key's in the
// order they come back, with the error that parked each, and runs the
// first of a key now, or dead-letters it (parking.Store's RunNow and
// DeadLetter, which schedule it in the default outbox table of its
// schema); the console logs each with who asked.
//
// # Replay and discard
//
// One dead letter, a selection, everything a list shows or a whole cause
// replays through deadletter's Queue.Replay, with its guarantees: each
// dead letter is sent once (the replay group records it), as it was
// consumed, to the partition it was consumed from, an interrupted replay
// resumes, and other groups of the topic skip it with
// deadletter.OnlyOwnReplays. The same selections discard through
// Queue.Discard: recorded as discarded in the replay group, shown so, and
// passed over by every later replay; nothing is deleted. Either first runs
// dry and asks for a confirmation that says how many go where, which are
// skipped as already replayed, already discarded or unroutable, which
// other groups read the topic, and the koto dlq command line of the same
// selection; then it runs in the background, one at a time per group, its
// page following its progress to the result. It reads the dead-letter
// topic only as far as its dry run did, so it takes no dead letter that
// the confirmation did not count, not even a matching one that arrived
// meanwhile. A selection is a deadletter.Filter, the one koto dlq's flags
// make: a cause by its ID, dead letters by their positions, a list by its
// query. The console logs each replay and discard it starts and ends with
// who started it (the token's name) and what it selects, and remembers
// the last 200 until it stops.
//
// # Security
//
// Nothing in a dead letter is ever rendered as HTML: html/template
// escapes every value, and the Content-Security-Policy allows the
// console's own script and styles alone. Every request that changes
// something is a POST carrying a CSRF token (a MAC of a cookie of the
// browser's) and passes net/http's cross-origin protection; with
// Config.ReadOnly those requests are refused and the pages show no
// action. With Config.Tokens, every request but the login page and the
// static assets needs a token: an Authorization: Bearer header, or the
// session cookie that the login page sets (a MAC of the token, never the
// token). The login page then sends the browser back to the page it
// asked for, and only to a path of the console: anything else, such as a
// path that a browser would read as another site's URL, leads to the
// overview. Without tokens the handler lets every request in, for mounting
// behind a server that authenticates; koto console listens on localhost
// unless given one.
//
// With Config.Metrics the handler serves /metrics in Prometheus's format:
// the figures of its last snapshot and counts of its replays and
// discards.
package console
