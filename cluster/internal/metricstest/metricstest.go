// Package metricstest reads one series out of a Prometheus registry, for
// tests of the controller's and the agent's metrics.
package metricstest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value is the value of the series name{labels} in g (a counter's or a
// gauge's), and whether that series exists. labels must name every label
// of the series. A failing Gather is returned as is.
func Value(g prometheus.Gatherer, name string, labels map[string]string) (float64, bool, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, false, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !labelsAre(m, labels) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true, nil
			}
			return m.GetGauge().GetValue(), true, nil
		}
	}
	return 0, false, nil
}

func labelsAre(m *dto.Metric, labels map[string]string) bool {
	if len(m.GetLabel()) != len(labels) {
		return false
	}
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}
