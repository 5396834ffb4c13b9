package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/koto-dev/watermill-koto/deadletter"
)

func runList(ctx context.Context, cio cmdIO, d *dlqFlags) error {
	q, f, err := d.openFiltered("list")
	if err != nil {
		return err
	}
	defer q.Close()
	letters, err := q.List(ctx, f)
	if err != nil {
		return err
	}
	if d.json {
		if letters == nil {
			letters = []*deadletter.Letter{}
		}
		return writeJSON(cio.stdout, letters)
	}
	if err := letterTable(cio.stdout, letters, nil); err != nil {
		return err
	}
	replayed, discarded := 0, 0
	for _, l := range letters {
		if l.Replayed {
			replayed++
		}
		if l.Discarded {
			discarded++
		}
	}
	fmt.Fprintf(cio.stdout, "%s in %s (%d replayed, %d discarded, as recorded in %s)\n",
		deadLetters(len(letters)), q.Topic(), replayed, discarded, q.ReplayGroup())
	return nil
}

func runShow(ctx context.Context, cio cmdIO, d *dlqFlags) error {
	if len(d.args) != 1 {
		return usageError("takes one argument, PARTITION/OFFSET (as list prints it) or a message UUID")
	}
	q, err := d.openQueue()
	if err != nil {
		return err
	}
	defer q.Close()
	l, err := findLetter(ctx, q, d.args[0])
	if err != nil {
		return err
	}
	if d.json {
		return writeJSON(cio.stdout, newShownLetter(q.Topic(), l))
	}
	return showLetter(cio.stdout, q.Topic(), l)
}

// positionShape is what a PARTITION/OFFSET looks like; a CloudEvent's id
// may hold a slash too.
var positionShape = regexp.MustCompile(`^\d+/\d+$`)

// findLetter returns the dead letter at a PARTITION/OFFSET, or the one
// with a UUID.
func findLetter(ctx context.Context, q *deadletter.Queue, arg string) (*deadletter.Letter, error) {
	if positionShape.MatchString(arg) {
		at, err := deadletter.ParsePosition(arg)
		if err != nil {
			return nil, usageError(err.Error())
		}
		return q.Show(ctx, at.Partition, at.Offset)
	}
	letters, err := q.List(ctx, deadletter.Filter{UUIDs: []string{arg}})
	if err != nil {
		return nil, err
	}
	switch len(letters) {
	case 0:
		return nil, fmt.Errorf("%w with UUID %q in %s", deadletter.ErrNotFound, arg, q.Topic())
	case 1:
		return letters[0], nil
	}
	positions := make([]string, len(letters))
	for i, l := range letters {
		positions[i] = position(l)
	}
	return nil, fmt.Errorf("UUID %q has %d dead letters in %s: %s; show one by its position: %s",
		arg, len(letters), q.Topic(), howFailedAgain(letters), strings.Join(positions, ", "))
}

// howFailedAgain says why one UUID has several dead letters: failed
// deliveries of the message, replays of it that failed again, or both.
func howFailedAgain(letters []*deadletter.Letter) string {
	replays := 0
	for _, l := range letters {
		if l.ReplayedFrom != "" {
			replays++
		}
	}
	deliveries := len(letters) - replays
	switch {
	case replays == 0:
		return fmt.Sprintf("%d deliveries of it failed, none of them a replay (it was published more than once, or delivered again)", deliveries)
	case deliveries == 0:
		return fmt.Sprintf("%d replays of it failed again", replays)
	}
	return fmt.Sprintf("%d deliveries of it failed, and %d replays of it failed again", deliveries, replays)
}
