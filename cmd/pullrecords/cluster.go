package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/agent"
	"github.com/pullrecords/pullrecords/cluster/controller"
	"github.com/pullrecords/pullrecords/cri"
)

// clusterClientOptions are the API server flags of controller and agent.
type clusterClientOptions struct {
	kubeconfig string
	qps        float32
	burst      int
}

func (o *clusterClientOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses the pod's service account (in-cluster)")
	cmd.Flags().Float32Var(&o.qps, "kube-api-qps", 200, "API requests per second (client-side limit)")
	cmd.Flags().IntVar(&o.burst, "kube-api-burst", 400, "API request burst (client-side limit)")
}

func (o *clusterClientOptions) config() (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: API server configuration: %v", errUsage, err)
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "pullrecords/" + readVersion().Version
	return cfg, nil
}

// signalContext is cancelled by SIGINT or SIGTERM. It carries klog's own
// logger, not the command line's errors-only one: the controller and the
// agent are daemons whose operators need their lifecycle (leading, each
// action's end) at the default verbosity; -v adds the detail.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return klog.NewContext(ctx, klog.Background()), cancel
}

func newControllerCmd(g *globalOptions) *cobra.Command {
	var (
		client   clusterClientOptions
		cfg      controller.Config
		ns, id   string
		leaderOn bool
		opsAddr  string
		// tolerations are --prepull-toleration's values, parsed in RunE.
		tolerations []string
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the cluster image cache controller (kube-fledged's ImageCache resources)",
		Long: `controller serves kube-fledged's ImageCache resources (kubefledged.io/v1alpha2):
for each (node, image) a cache's action covers it has the kubelet itself pull the
image through a short-lived pod bound to the node that carries the cache's pull
secrets, so the kubelet checks and records the credential (KEP-2535) and only pods
holding the secret may use the image. Results go to one NodeImages object per node
and are aggregated into each ImageCache's status. It refuses to start while a
kube-fledged controller runs (a pod of kube-fledged's controller service account in
its namespace); under leader election that failure is logged, the Lease released and
the command exits non-zero. Replicas elect one leader through a Lease.
Deploy it with deploy/cluster (see cluster/README.md in the repository).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			interval, err := refreshIntervalOf(cfg.RefreshInterval)
			if err != nil {
				return err
			}
			cfg.RefreshInterval = interval
			for _, s := range tolerations {
				t, err := controller.ParseToleration(s)
				if err != nil {
					return usageErrorf("--prepull-toleration: %v", err)
				}
				cfg.Placement.Tolerations = append(cfg.Placement.Tolerations, t)
			}
			rc, err := client.config()
			if err != nil {
				return err
			}
			if cfg.Kube, err = kubernetes.NewForConfig(controller.Protobuf(rc)); err != nil {
				return err
			}
			if cfg.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
				return err
			}
			metrics := controller.NewMetrics()
			cfg.Metrics = metrics
			c, err := controller.New(cfg)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			stopOps, _, err := startOps(ctx, opsAddr, c.Healthy, metrics.Register)
			if err != nil {
				return err
			}
			defer stopOps()
			if !leaderOn {
				return c.Run(ctx)
			}
			if id == "" {
				id, _ = os.Hostname()
			}
			err = c.RunWithLeaderElection(ctx, controller.LeaderElection{Namespace: ns, Identity: id})
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	client.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&cfg.NoopImage, "noop-image", "", "this project's image, holding /pullrecords-noop, which pre-pull pods copy in and run (required)")
	f.StringVar(&cfg.PriorityClassName, "priority-class-name", "", "priorityClassName of pre-pull pods")
	f.DurationVar(&cfg.PullDeadline, "image-pull-deadline-duration", 5*time.Minute, "how long one pre-pull may take before it fails")
	f.DurationVar(&cfg.RefreshInterval, "image-cache-refresh-frequency", 15*time.Minute, "re-check every cache this long after its last action; 0s disables periodic refresh, as in kube-fledged")
	f.IntVar(&cfg.MaxInFlightPerNode, "max-prepulls-per-node", 2, "pre-pull pods at once on one node")
	f.IntVar(&cfg.MaxInFlight, "max-prepulls", 200, "pre-pull pods at once in the cluster")
	f.IntVar(&cfg.MaxImagesPerPod, "max-images-per-prepull", 32, "images one pre-pull pod pulls, one container each (1..64)")
	f.DurationVar(&cfg.AgentTimeout, "agent-timeout", 3*time.Minute, "an agent silent this long is not trusted; the node's status is used instead")
	f.IntVar(&cfg.MaxImageFsUsedPercent, "max-imagefs-used-percent", 85, "skip pulls on nodes whose image filesystem is fuller (100: never skip)")
	f.StringVar(&cfg.KubeFledgedNamespace, "kube-fledged-namespace", "kube-fledged",
		"namespace of kube-fledged's controller: the controller refuses to start while a kube-fledged controller pod runs there, and removes kube-fledged's leftover Jobs there only")
	f.StringSliceVar(&cfg.KubeFledgedServiceAccounts, "kube-fledged-service-account", controller.DefaultKubeFledgedServiceAccounts,
		"service accounts of kube-fledged's controller (repeat or comma-separate): only its pods in --kube-fledged-namespace count as kube-fledged running; the defaults are its manifests' and its Helm chart's as installed in its README (a Helm install names it <release fullname>-controller)")
	f.IntVar(&cfg.MaxImagesPerCache, "max-images-per-cache", controller.DefaultMaxImagesPerCache,
		"distinct images one ImageCache may list; a larger cache is refused (status Failed, reason CacheTooLarge)")
	f.IntVar(&cfg.MaxCacheImagesPerNode, "max-cache-images-per-node", controller.DefaultMaxCacheImagesPerNode,
		"(cache, image) entries one node's NodeImages holds (keeps it under 1 MiB; longer names count as more); over it, caches are admitted by fair shares across namespaces and the rest refused (reason NodeImageLimit)")
	f.StringArrayVar(&tolerations, "prepull-toleration", nil,
		"a taint pre-pull pods may land on, repeatable: key=value:Effect (that taint), key:Effect (any value) or Exists (every taint); "+
			"Effect is NoSchedule, NoExecute or PreferNoSchedule. These are the pods' only tolerations (none by default: nodes with a NoSchedule "+
			"or NoExecute taint get no pod) and each grants every tenant's ImageCaches the right to pull their images, with their secrets, on "+
			"every node it tolerates; Exists grants every tainted node (dedicated pools included)")
	f.BoolVar(&cfg.Placement.IncludeControlPlane, "include-control-plane-nodes", false,
		"let pre-pull pods onto control-plane nodes (labelled node-role.kubernetes.io/control-plane or master), tolerating their "+
			"NoSchedule taint: every tenant's images, pulled with its secrets, then land next to the API server and etcd")
	f.BoolVar(&cfg.Placement.IncludeCordoned, "include-cordoned-nodes", false,
		"let pre-pull pods onto cordoned nodes (spec.unschedulable), tolerating node.kubernetes.io/unschedulable:NoSchedule: "+
			"nodes drained for maintenance or retirement keep getting images")
	f.BoolVar(&leaderOn, "leader-elect", true, "elect one leader among replicas through a Lease")
	f.StringVar(&ns, "leader-elect-namespace", envOr("POD_NAMESPACE", "pullrecords-system"), "namespace of the Lease")
	f.StringVar(&id, "leader-elect-identity", os.Getenv("POD_NAME"), "this replica's identity (default: the host name)")
	f.StringVar(&opsAddr, "ops-address", "", opsAddressUsage)
	return cmd
}

func newAgentCmd(g *globalOptions) *cobra.Command {
	var (
		client   clusterClientOptions
		cfg      agent.Config
		endpoint string
		opsAddr  string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: exact image presence through the CRI, and purges",
		Long: `agent runs on every node (a DaemonSet). It reads its node's NodeImages object,
asks the runtime through the CRI whether each image there is present (ImageStatus,
an exact answer rather than the 50 images of the node status), removes the images
listed for purge that a cache pulled (RemoveImage, by image ID, unless another
cache keeps the image, a container uses it, the runtime pins it or it has other
tags: ListContainers and ImageStatus just before), and reports presence and
image filesystem use on that object. It reads no Secrets and writes nothing on the node's filesystem.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.NodeName == "" {
				return usageErrorf("--node-name (or env NODE_NAME) is required")
			}
			rc, err := client.config()
			if err != nil {
				return err
			}
			if cfg.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			svc, err := cri.Dial(ctx, endpoint)
			if err != nil {
				return err
			}
			defer svc.Close()
			cfg.Runtime = svc
			guard, conn, err := agent.DialCRIGuard(endpoint)
			if err != nil {
				return err
			}
			defer conn.Close()
			cfg.Guard = guard
			metrics := agent.NewMetrics()
			cfg.Metrics = metrics
			a, err := agent.New(cfg)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			stopOps, _, err := startOps(ctx, opsAddr, a.Healthy, metrics.Register)
			if err != nil {
				return err
			}
			defer stopOps()
			err = a.Run(ctx)
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	client.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME)")
	f.StringVar(&endpoint, "runtime-endpoint", "unix:///run/containerd/containerd.sock", "the CRI endpoint (CRI-O: unix:///var/run/crio/crio.sock)")
	f.DurationVar(&cfg.ResyncInterval, "resync-interval", time.Minute, "heartbeat and full re-check period")
	f.StringVar(&cfg.ImageFsPath, "imagefs-path", "", "a path on the image filesystem to measure its size (default: the mount point the runtime reports)")
	f.StringVar(&opsAddr, "ops-address", "", opsAddressUsage)
	return cmd
}

// refreshIntervalOf maps --image-cache-refresh-frequency to
// controller.Config.RefreshInterval: kube-fledged's 0s turns periodic
// refresh off (the Config's zero value would mean its 15m default), and a
// negative value is a usage error.
func refreshIntervalOf(flag time.Duration) (time.Duration, error) {
	switch {
	case flag < 0:
		return 0, usageErrorf("--image-cache-refresh-frequency %s is negative; 0s disables periodic refresh", flag)
	case flag == 0:
		return -1, nil
	default:
		return flag, nil
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
