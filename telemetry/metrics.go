package telemetry

import (
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Metrics are one process's Prometheus metrics, on a registry of their own
// (not the global default), with the Go runtime and process collectors.
// Every method is safe on a nil *Metrics and then does nothing, so the
// services call them unconditionally and pay nothing when metrics are off.
type Metrics struct {
	reg *prometheus.Registry

	goalsSubmitted prometheus.Counter
	goalsEnded     *prometheus.CounterVec
	goalDuration   *prometheus.HistogramVec
	turnDuration   prometheus.Histogram
	taskDuration   *prometheus.HistogramVec
	refusals       *prometheus.CounterVec
	searchDuration prometheus.Histogram
	indexAgents    prometheus.Gauge
	llmCalls       *prometheus.CounterVec
	llmTokens      *prometheus.CounterVec
	llmDuration    *prometheus.HistogramVec
}

// Metric names, as /metrics shows them (docs/architecture.md lists them).
const (
	MetricGoalsSubmitted = "ioa_goals_submitted_total"
	MetricGoalsEnded     = "ioa_goals_ended_total"
	MetricGoalDuration   = "ioa_goal_duration_seconds"
	MetricTurnDuration   = "ioa_turn_duration_seconds"
	MetricTaskDuration   = "ioa_task_duration_seconds"
	MetricRefusals       = "ioa_referee_refusals_total"
	MetricSearchDuration = "ioa_registry_search_duration_seconds"
	MetricIndexAgents    = "ioa_registry_index_agents"
	MetricLLMCalls       = "ioa_llm_calls_total"
	MetricLLMTokens      = "ioa_llm_tokens_total"
	MetricLLMDuration    = "ioa_llm_call_duration_seconds"
	MetricNATSConnected  = "ioa_nats_connected"
	MetricNATSReconnects = "ioa_nats_reconnects_total"
)

// Buckets: goals take seconds to minutes; a turn or a task from
// milliseconds (a rules policy) to minutes (a model, a slow tool).
var (
	goalBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	stepBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	fastBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
)

// NewMetrics creates the metrics of one process.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.goalsSubmitted = m.counter(prometheus.CounterOpts{Name: MetricGoalsSubmitted,
		Help: "Goals accepted by this orchestrator instance."})
	m.goalsEnded = m.counterVec(prometheus.CounterOpts{Name: MetricGoalsEnded,
		Help: "Goals ended by this orchestrator instance, by status (concluded, failed, cancelled, timed_out) and outcome (succeeded, partial, failed)."},
		"status", "outcome")
	m.goalDuration = m.histogramVec(prometheus.HistogramOpts{Name: MetricGoalDuration,
		Help: "Time from a goal's submission to its end, by status.", Buckets: goalBuckets}, "status")
	m.turnDuration = m.histogram(prometheus.HistogramOpts{Name: MetricTurnDuration,
		Help: "Time from a speaker getting the turn to its move being logged (one observation per turn).", Buckets: stepBuckets})
	m.taskDuration = m.histogramVec(prometheus.HistogramOpts{Name: MetricTaskDuration,
		Help: "Time from a task's assignment to its result being logged, by status (completed, failed).", Buckets: stepBuckets}, "status")
	m.refusals = m.counterVec(prometheus.CounterOpts{Name: MetricRefusals,
		Help: "Messages the referee refused, by error code (not_your_turn, illegal_transition, ...)."}, "code")
	m.searchDuration = m.histogram(prometheus.HistogramOpts{Name: MetricSearchDuration,
		Help: "Time the registry took to rank one search.", Buckets: fastBuckets})
	m.indexAgents = m.gauge(prometheus.GaugeOpts{Name: MetricIndexAgents,
		Help: "Agent cards in this registry instance's search index."})
	m.llmCalls = m.counterVec(prometheus.CounterOpts{Name: MetricLLMCalls,
		Help: "Model calls, by agent, model and result (ok, error)."}, "agent", "model", "result")
	m.llmTokens = m.counterVec(prometheus.CounterOpts{Name: MetricLLMTokens,
		Help: "Model tokens, by agent, model and kind (input, output)."}, "agent", "model", "kind")
	m.llmDuration = m.histogramVec(prometheus.HistogramOpts{Name: MetricLLMDuration,
		Help: "Time of one model call, by model.", Buckets: stepBuckets}, "model")
	return m
}

func (m *Metrics) counter(o prometheus.CounterOpts) prometheus.Counter {
	c := prometheus.NewCounter(o)
	m.reg.MustRegister(c)
	return c
}

func (m *Metrics) counterVec(o prometheus.CounterOpts, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(o, labels)
	m.reg.MustRegister(c)
	return c
}

func (m *Metrics) gauge(o prometheus.GaugeOpts) prometheus.Gauge {
	g := prometheus.NewGauge(o)
	m.reg.MustRegister(g)
	return g
}

func (m *Metrics) histogram(o prometheus.HistogramOpts) prometheus.Histogram {
	h := prometheus.NewHistogram(o)
	m.reg.MustRegister(h)
	return h
}

func (m *Metrics) histogramVec(o prometheus.HistogramOpts, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(o, labels)
	m.reg.MustRegister(h)
	return h
}

// Registry is the process's Prometheus registry, for collectors of one's own.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the metrics in the Prometheus text format (mount it on
// /metrics). On a nil *Metrics it answers 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// GoalSubmitted counts a goal accepted.
func (m *Metrics) GoalSubmitted() {
	if m == nil {
		return
	}
	m.goalsSubmitted.Inc()
}

// GoalEnded counts a goal's end and observes how long it ran.
func (m *Metrics) GoalEnded(status, outcome string, elapsed time.Duration) {
	if m == nil {
		return
	}
	m.goalsEnded.WithLabelValues(status, outcome).Inc()
	m.goalDuration.WithLabelValues(status).Observe(elapsed.Seconds())
}

// Turn observes one turn: from the speaker getting the turn to its move
// being logged.
func (m *Metrics) Turn(d time.Duration) {
	if m == nil {
		return
	}
	m.turnDuration.Observe(d.Seconds())
}

// TaskDone observes one task from assignment to result.
func (m *Metrics) TaskDone(status string, d time.Duration) {
	if m == nil {
		return
	}
	m.taskDuration.WithLabelValues(status).Observe(d.Seconds())
}

// Refused counts a message the referee refused, by its protocol error code.
func (m *Metrics) Refused(err error) {
	if m == nil || err == nil {
		return
	}
	m.refusals.WithLabelValues(protocol.AsError(err).Code).Inc()
}

// Searched observes one registry search.
func (m *Metrics) Searched(d time.Duration) {
	if m == nil {
		return
	}
	m.searchDuration.Observe(d.Seconds())
}

// IndexSize sets the number of cards in the registry's search index.
func (m *Metrics) IndexSize(n int) {
	if m == nil {
		return
	}
	m.indexAgents.Set(float64(n))
}

// LLMCall counts one model call of agent and its tokens.
func (m *Metrics) LLMCall(agent, model string, u protocol.Usage, d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.llmCalls.WithLabelValues(agent, model, result).Inc()
	m.llmTokens.WithLabelValues(agent, model, "input").Add(float64(u.PromptTokens))
	m.llmTokens.WithLabelValues(agent, model, "output").Add(float64(u.CompletionTokens))
	m.llmDuration.WithLabelValues(model).Observe(d.Seconds())
}

// WatchConn exports a NATS connection's state under the label conn=name:
// ioa_nats_connected (1 while connected) and ioa_nats_reconnects_total.
// A name already watched keeps its first connection.
func (m *Metrics) WatchConn(name string, nc *nats.Conn) {
	if m == nil || nc == nil {
		return
	}
	labels := prometheus.Labels{"conn": name}
	connected := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricNATSConnected, ConstLabels: labels,
		Help: "1 while the NATS connection is connected, else 0."}, func() float64 {
		if nc.IsConnected() {
			return 1
		}
		return 0
	})
	reconnects := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: MetricNATSReconnects, ConstLabels: labels,
		Help: "Times the NATS connection reconnected."}, func() float64 { return float64(nc.Stats().Reconnects) })
	for _, c := range []prometheus.Collector{connected, reconnects} {
		if err := m.reg.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if !errors.As(err, &dup) {
				panic(err) // a programming error: a bad name or help
			}
		}
	}
}
