package kubeletadapter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pullrecords/pullrecords/pullmanager"
)

// SwapKubeletMetrics puts m's five kubelet-named collectors in reg in place
// of the kubelet's own. The kubelet's pullmanager package registers its five
// collectors in the component-base global registry when it is initialised;
// they stay there, idle, once this library replaces the manager, and a
// second collector of the same name cannot be registered next to them.
//
// m's collectors describe exactly what the kubelet's describe (name, HELP
// text with the "[ALPHA] " prefix, label names), so registering one of ours
// fails with a prometheus.AlreadyRegisteredError that hands back the
// kubelet's collector; that one is unregistered and ours registered in its
// place. For each name:
//   - the kubelet's was registered: it is replaced (also when it was ours
//     from an earlier swap, so calling this again with a new m is fine);
//   - nothing of that name is registered (component-base did not register
//     the kubelet's, for example because the metric is disabled): ours is
//     left out too;
//   - a collector of that name with other descriptors is registered (a
//     kubelet whose metrics changed): an error naming the metric, nothing of
//     that name is changed.
//
// With extra set, m's extra collectors are registered as well (an error if
// they are already there).
//
// The replaced collectors bypass component-base: they are plain Prometheus
// collectors, so component-base's metric reset (DELETE on /metrics),
// hidden/disabled-metric handling and label allow-lists do not apply to
// them. See README.md.
func SwapKubeletMetrics(reg prometheus.Registerer, m *pullmanager.Metrics, extra bool) error {
	if reg == nil || m == nil {
		return errors.New("kubeletadapter: nil registerer or metrics")
	}
	var errs []error
	for _, c := range m.KubeletCollectors() {
		// Registering first tells the three cases apart without touching
		// what is there: prometheus.Registry.Unregister matches on names
		// and constant labels only, so it would also remove a collector
		// whose HELP text differs, which could then not be replaced.
		err := reg.Register(c)
		var already prometheus.AlreadyRegisteredError
		switch {
		case err == nil:
			// Nothing of that name was registered: leave it out.
			reg.Unregister(c)
		case errors.As(err, &already):
			// The same descriptors: swap.
			reg.Unregister(already.ExistingCollector)
			if err := reg.Register(c); err != nil {
				errs = append(errs, fmt.Errorf("registering %s: %w", collectorName(c), err))
			}
		default:
			errs = append(errs, fmt.Errorf("the registered %s differs from the kubelet v1.37 descriptor: %w", collectorName(c), err))
		}
	}
	if extra {
		for _, c := range m.ExtraCollectors() {
			if err := reg.Register(c); err != nil {
				errs = append(errs, fmt.Errorf("registering %s: %w", collectorName(c), err))
			}
		}
	}
	return errors.Join(errs...)
}

// collectorName returns the fully-qualified name of c's first descriptor.
func collectorName(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 8)
	go func() { c.Describe(ch); close(ch) }()
	name := "?"
	for d := range ch {
		if name == "?" {
			_, rest, _ := strings.Cut(d.String(), `fqName: "`)
			name, _, _ = strings.Cut(rest, `"`)
		}
	}
	return name
}
