package middleware

// ErrMarkPending lets the external tests recognise the outage of a
// delivery whose key an earlier delivery still waits to mark.
var ErrMarkPending = errMarkPending
