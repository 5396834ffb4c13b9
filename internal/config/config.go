// Package config holds what the Config types of every package share: the
// error of an invalid field, and the collection of every such error of one
// configuration into a single error.
package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is the sentinel every configuration error wraps
// (koto.ErrInvalidConfig).
var ErrInvalid = errors.New("invalid configuration")

// fieldError is one invalid field: root is the outermost configuration
// type that holds it ("broker.Config", or "cqrs.ServiceConfig" once
// nested); rest is the path of the field below root ("Brokers", or
// "Broker.Brokers" once nested), empty for the whole value.
type fieldError struct {
	root, rest string
	problem    error // wraps the cause of the problem, if it has one
}

func (e *fieldError) Error() string {
	return "invalid configuration: " + e.field() + " " + e.problem.Error()
}

func (e *fieldError) Unwrap() []error { return []error{ErrInvalid, e.problem} }

func (e *fieldError) field() string {
	if e.rest == "" {
		return e.root
	}
	return e.root + "." + e.rest
}

// Problems collects the invalid fields of one configuration; make it with
// [For].
type Problems struct {
	root string
	errs []error
}

// For returns the collection for the configuration type root, such as
// "broker.Config".
func For(root string) *Problems { return &Problems{root: root} }

// Add records that field (below the root; "" for the whole value) is
// invalid: problem says what is wrong and what to change, as in
// "is empty; list at least one host:port". As in fmt.Errorf, a %w verb
// wraps its error, so that errors.Is finds the cause.
func (p *Problems) Add(field, format string, args ...any) {
	p.errs = append(p.errs, &fieldError{root: p.root, rest: field, problem: fmt.Errorf(format, args...)})
}

// Nest records the problems of a nested configuration's Validate, err,
// as problems of field: "Backoff.InitialInterval" held at field
// "DeadLetter.Backoff" of "middleware.Config" becomes
// "middleware.Config.DeadLetter.Backoff.InitialInterval".
func (p *Problems) Nest(field string, err error) {
	for _, e := range flatten(err) {
		var fe *fieldError
		if errors.As(e, &fe) {
			e = &fieldError{root: p.root, rest: path(field, fe.rest), problem: fe.problem}
		}
		p.errs = append(p.errs, e)
	}
}

// Err returns nil when nothing was recorded, the one problem, or all of
// them joined, each on a line of its own.
func (p *Problems) Err() error {
	if len(p.errs) == 1 {
		return p.errs[0]
	}
	return errors.Join(p.errs...)
}

// Invalid returns the error of one invalid field of root, for the checks
// a constructor makes beyond its Config's Validate.
func Invalid(root, field, format string, args ...any) error {
	p := For(root)
	p.Add(field, format, args...)
	return p.Err()
}

func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*fieldError); ok {
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range j.Unwrap() {
			all = append(all, flatten(e)...)
		}
		return all
	}
	return []error{err}
}

// path joins the parts of a field's path that are not empty with dots.
func path(parts ...string) string {
	var kept []string
	for _, part := range parts {
		if part = strings.Trim(part, "."); part != "" {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, ".")
}
