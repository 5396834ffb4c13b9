package console

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics serves /metrics: the figures of the last snapshot, and counts
// of the replays and discards the console ran.
type metrics struct {
	http.Handler
	replays, discards *prometheus.CounterVec
	sent, discarded   *prometheus.CounterVec
}

var (
	groupLagDesc      = prometheus.NewDesc("koto_console_consumer_group_lag", "Records not yet consumed by a consumer group, over the partitions it consumes.", []string{"group"}, nil)
	partitionLagDesc  = prometheus.NewDesc("koto_console_consumer_partition_lag", "Records not yet consumed by a consumer group on one partition.", []string{"group", "topic", "partition"}, nil)
	deadLettersDesc   = prometheus.NewDesc("koto_console_dead_letters", "Records in a consumer group's dead-letter topic, replayed ones included.", []string{"group"}, nil)
	outboxWaitingDesc = prometheus.NewDesc("koto_console_outbox_waiting", "Committed outbox rows not yet forwarded.", []string{"table"}, nil)
	outboxHeldDesc    = prometheus.NewDesc("koto_console_outbox_held", "Waiting outbox rows held behind an older open transaction.", []string{"table"}, nil)
	outboxLagDesc     = prometheus.NewDesc("koto_console_outbox_lag_seconds", "Age of the oldest waiting outbox row.", []string{"table"}, nil)
)

func newMetrics(h *Handler) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		Handler:   promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		replays:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "koto_console_replays_total", Help: "Replays the console ran, by group and outcome (done, failed)."}, []string{"group", "outcome"}),
		sent:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "koto_console_replayed_total", Help: "Dead letters the console's replays sent back."}, []string{"group"}),
		discards:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "koto_console_discards_total", Help: "Discards the console ran, by group and outcome (done, failed)."}, []string{"group", "outcome"}),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "koto_console_discarded_total", Help: "Dead letters the console's discards recorded as discarded."}, []string{"group"}),
	}
	reg.MustRegister(m.replays, m.sent, m.discards, m.discarded, snapshotCollector{h: &h.history})
	return m
}

// ended counts a replay, or discard, that ended; m may be nil.
func (m *metrics) ended(k jobKind, group string, res replayResult, err error) {
	if m == nil {
		return
	}
	outcome := string(jobDone)
	if err != nil {
		outcome = string(jobFailed)
	}
	if k == kindDiscard {
		m.discards.WithLabelValues(group, outcome).Inc()
		m.discarded.WithLabelValues(group).Add(float64(res.Discarded))
		return
	}
	m.replays.WithLabelValues(group, outcome).Inc()
	m.sent.WithLabelValues(group).Add(float64(res.Sent))
}

// snapshotCollector reports the last snapshot the console took.
type snapshotCollector struct{ h *history }

func (c snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{groupLagDesc, partitionLagDesc, deadLettersDesc, outboxWaitingDesc, outboxHeldDesc, outboxLagDesc} {
		ch <- d
	}
}

func (c snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.h.last()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, g := range s.Groups {
		gauge(groupLagDesc, float64(g.Lag), g.Name)
		gauge(deadLettersDesc, float64(g.DeadLetters), g.Name)
		for _, p := range g.Partitions {
			gauge(partitionLagDesc, float64(p.Lag), g.Name, p.Topic, strconv.Itoa(int(p.Partition)))
		}
	}
	for _, o := range s.Outboxes {
		gauge(outboxWaitingDesc, float64(o.Waiting), o.Table)
		gauge(outboxHeldDesc, float64(o.Held), o.Table)
		gauge(outboxLagDesc, o.Lag.Seconds(), o.Table)
	}
}
