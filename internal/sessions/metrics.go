package sessions

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/platinum-dev/platinum/internal/metrics"
)

// Collector reads the warm pools at scrape time: each template pool's
// members ready to claim and on their way, and its settings, so a pool
// that does not keep up shows before claims fall back to cold boots.
func (s *Service) Collector() prometheus.Collector { return poolCollector{s} }

type poolCollector struct{ s *Service }

var (
	descPoolMembers = prometheus.NewDesc(metrics.Namespace+"_warm_pool_sandboxes",
		"Warm-pool sandboxes by template and state (ready: claimable now; provisioning: on their way).",
		[]string{"template", "state"}, nil)
	descPoolMin = prometheus.NewDesc(metrics.Namespace+"_warm_pool_min_ready",
		"The ready sandboxes a template's warm pool keeps.", []string{"template"}, nil)
	descPoolMax = prometheus.NewDesc(metrics.Namespace+"_warm_pool_max",
		"The most sandboxes a template's warm pool holds.", []string{"template"}, nil)
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPoolMembers
	ch <- descPoolMin
	ch <- descPoolMax
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pools, err := c.s.Pools(ctx, Principal{})
	if err != nil {
		return // the core's collector reports store scrape errors
	}
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(descPoolMembers, prometheus.GaugeValue, float64(p.Ready), p.Template, "ready")
		ch <- prometheus.MustNewConstMetric(descPoolMembers, prometheus.GaugeValue, float64(p.Provisioning), p.Template, "provisioning")
		ch <- prometheus.MustNewConstMetric(descPoolMin, prometheus.GaugeValue, float64(p.MinReady), p.Template)
		ch <- prometheus.MustNewConstMetric(descPoolMax, prometheus.GaugeValue, float64(p.Max), p.Template)
	}
}
