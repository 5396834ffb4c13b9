package middleware

// ErrMarkPending lets the external tests recognise the outage of a
// delivery whose key an earlier delivery still waits to mark.
var ErrMarkPending = errMarkPending

// Turns reports the keys of c's check-handle-mark that have an entry for
// their turn, and the deliveries that hold or wait for one.
func (c *Chain) Turns() (keys, deliveries int) {
	ts := &c.marks.turns
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.keys {
		deliveries += t.users
	}
	return len(ts.keys), deliveries
}
