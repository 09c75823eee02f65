package sessions

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/platinum-dev/platinum/internal/metrics"
)

// Collector reads the warm pools at scrape time: each pool's (template and runtime class)
// members ready to claim and on their way, and its settings, so a pool
// that does not keep up shows before claims fall back to cold boots.
func (s *Service) Collector() prometheus.Collector { return poolCollector{s} }

type poolCollector struct{ s *Service }

var (
	descPoolMembers = prometheus.NewDesc(metrics.Namespace+"_warm_pool_sandboxes",
		"Warm-pool sandboxes by template, runtime class and state (ready: claimable now; provisioning: on their way).",
		[]string{"template", "runtime", "state"}, nil)
	descPoolMin = prometheus.NewDesc(metrics.Namespace+"_warm_pool_min_ready",
		"The ready sandboxes a warm pool (template and runtime class) keeps.", []string{"template", "runtime"}, nil)
	descPoolMax = prometheus.NewDesc(metrics.Namespace+"_warm_pool_max",
		"The most sandboxes a warm pool (template and runtime class) holds.", []string{"template", "runtime"}, nil)
	descPoolTarget = prometheus.NewDesc(metrics.Namespace+"_warm_pool_target",
		"The live sandboxes a warm pool (template and runtime class) keeps now: min_ready, or for an auto pool its demand-sized target, cut to the host's memory budget (docs/sessions.md).",
		[]string{"template", "runtime"}, nil)
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPoolMembers
	ch <- descPoolMin
	ch <- descPoolMax
	ch <- descPoolTarget
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pools, err := c.s.Pools(ctx, Principal{})
	if err != nil {
		return // the core's collector reports store scrape errors
	}
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(descPoolMembers, prometheus.GaugeValue, float64(p.Ready), p.Template, p.Runtime, "ready")
		ch <- prometheus.MustNewConstMetric(descPoolMembers, prometheus.GaugeValue, float64(p.Provisioning), p.Template, p.Runtime, "provisioning")
		ch <- prometheus.MustNewConstMetric(descPoolMin, prometheus.GaugeValue, float64(p.MinReady), p.Template, p.Runtime)
		ch <- prometheus.MustNewConstMetric(descPoolMax, prometheus.GaugeValue, float64(p.Max), p.Template, p.Runtime)
		ch <- prometheus.MustNewConstMetric(descPoolTarget, prometheus.GaugeValue, float64(p.Target), p.Template, p.Runtime)
	}
}
