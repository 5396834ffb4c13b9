package console

import (
	"crypto/rand"
	"maps"
	"slices"
	"sync"
	"time"
)

// jobKind is what a job does with the dead letters it selects.
type jobKind string

const (
	kindReplay  jobKind = "replay"
	kindDiscard jobKind = "discard"
)

// jobState is where a job is: planned by a dry run and waiting for its
// confirmation, running, or ended.
type jobState string

const (
	jobPlanned jobState = "planned"
	jobRunning jobState = "running"
	jobDone    jobState = "done"
	jobFailed  jobState = "failed"
)

// maxJobs is how many replays and discards the console remembers; the
// oldest ended or unconfirmed ones go first.
const maxJobs = 200

// job is one replay, or discard: what it selects, what its dry run found,
// and what it did.
type job struct {
	ID, Group, Who, What string
	Kind                 jobKind
	Filter               filter
	Created              time.Time
	// Ends are the end offsets that the dry run and the replay read up to.
	Ends map[int32]int64
	// Plan is the dry run's count; Targets where it would send.
	Plan     replayResult
	Targets  []target
	AlsoRead []string // other groups that consume the targets
	Command  string   // the koto command line of the same job

	mu       sync.Mutex
	state    jobState
	result   replayResult
	sentTo   map[string]int
	err      string
	finished time.Time
}

// target is a topic and how many dead letters go there.
type target struct {
	Topic string
	Count int
}

// targets lists counts by topic, sorted by topic.
func targets(counts map[string]int) []target {
	var out []target
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		out = append(out, target{Topic: t, Count: counts[t]})
	}
	return out
}

// jobStatus is a job's progress, as the page and its script read it.
type jobStatus struct {
	State            jobState  `json:"state"`
	ToScan           int64     `json:"to_scan"`
	Scanned          int64     `json:"scanned"`
	Sent             int       `json:"sent"`
	Discarded        int       `json:"discarded"`
	AlreadyReplayed  int       `json:"already_replayed"`
	AlreadyDiscarded int       `json:"already_discarded"`
	Unroutable       int       `json:"unroutable"`
	SentTo           []target  `json:"-"`
	Error            string    `json:"error,omitempty"`
	Finished         time.Time `json:"finished,omitzero"`
}

func (j *job) status() jobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.result
	return jobStatus{State: j.state, ToScan: r.ToScan, Scanned: r.Scanned, Sent: r.Sent, Discarded: r.Discarded,
		AlreadyReplayed: r.AlreadyReplayed, AlreadyDiscarded: r.AlreadyDiscarded, Unroutable: r.Unroutable,
		SentTo: targets(j.sentTo), Error: j.err, Finished: j.finished}
}

func (j *job) progress(p replayProgress) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.result = p.Result
	if j.sentTo == nil {
		j.sentTo = map[string]int{}
	}
	for _, t := range sentTo(p) {
		j.sentTo[t]++
	}
}

func (j *job) finish(r replayResult, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.result, j.state, j.finished = r, jobDone, time.Now()
	if err != nil {
		j.state, j.err = jobFailed, err.Error()
	}
}

// jobs are the replays and discards the console remembers.
type jobs struct {
	mu   sync.Mutex
	list []*job // oldest first
}

func (js *jobs) add(j *job) {
	j.ID, j.Created, j.state = rand.Text()[:12], time.Now(), jobPlanned
	js.mu.Lock()
	defer js.mu.Unlock()
	js.list = append(js.list, j)
	for len(js.list) > maxJobs {
		i := slices.IndexFunc(js.list, func(o *job) bool { return o.status().State != jobRunning })
		if i < 0 {
			break
		}
		js.list = slices.Delete(js.list, i, i+1)
	}
}

func (js *jobs) get(id string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	for _, j := range js.list {
		if j.ID == id {
			return j
		}
	}
	return nil
}

// all returns the jobs, newest first.
func (js *jobs) all() []*job {
	js.mu.Lock()
	defer js.mu.Unlock()
	out := slices.Clone(js.list)
	slices.Reverse(out)
	return out
}

// start marks j running, unless it was started already or another job
// of its group runs: deadletter runs one replay, or discard, of a replay
// group at a time.
func (js *jobs) start(j *job) error {
	js.mu.Lock()
	defer js.mu.Unlock()
	for _, o := range js.list {
		if o != j && o.Group == j.Group && o.status().State == jobRunning {
			return &httpError{code: 409, msg: "a " + string(o.Kind) + " of " + j.Group + " is running; wait for it to end"}
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state != jobPlanned {
		return &httpError{code: 409, msg: "this " + string(j.Kind) + " was started already"}
	}
	j.state = jobRunning
	return nil
}
