package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type configMapSummary struct {
	ConfigMaps int     `json:"configMaps"`
	DataBytes  int64   `json:"dataBytes"` // the values of every key of every ConfigMap
	Seconds    float64 `json:"seconds"`
	Requests   int64   `json:"requests"`
	// What the benchmark reads: a ConfigMap of the Deployment `load` reads, and the namespace
	// whose pods it lists.
	GetConfigMap   objectRef `json:"getConfigMap"`
	ListNamespace  string    `json:"listNamespace"`
	ListNamespaceN int       `json:"listNamespaceConfigMaps"`
	// The ConfigMap written last (highest resourceVersion): a cache that watches them, each
	// kind's events in order, holds every one once it holds this one.
	LastWritten objectRef `json:"lastWritten"`
}

// configMapName is the j-th ConfigMap of d: its current one, then older generations named as
// kustomize's configMapGenerator names them (a hash of the content as suffix).
func configMapName(d *deployPlan, j int, r *rand.Rand) string {
	if j == 0 {
		return d.name + "-config"
	}
	return d.name + "-config-" + suffix(r) + suffix(r)
}

// configMapObject is the j-th ConfigMap of d: the application's config.yaml and a few plain
// settings, with values that differ from one ConfigMap to the next as real ones do.
func configMapObject(d *deployPlan, j int) *corev1.ConfigMap {
	r := rand.New(rand.NewPCG(fnv64(d.ns+"/"+d.name), uint64(j)))
	name := configMapName(d, j, r)
	word := d.labels["app.kubernetes.io/name"]
	var y strings.Builder
	fmt.Fprintf(&y, "# %s configuration, generation %d; rendered by helm, do not edit by hand\n", d.name, j+1)
	fmt.Fprintf(&y, "server:\n  listen: 0.0.0.0:8080\n  metricsListen: 0.0.0.0:9090\n  readTimeout: %ds\n  writeTimeout: %ds\n"+
		"  idleTimeout: %ds\n  maxHeaderBytes: %d\n  gracefulShutdown: %ds\n", 5+r.IntN(25), 10+r.IntN(50), 60+r.IntN(120),
		1<<(13+r.IntN(4)), 10+r.IntN(20))
	fmt.Fprintf(&y, "database:\n  host: %s-db.%s.svc.cluster.local\n  port: 5432\n  name: %s\n  user: %s_rw\n"+
		"  sslMode: verify-full\n  pool:\n    maxOpen: %d\n    maxIdle: %d\n    connMaxLifetime: %dm\n  statementTimeout: %dms\n",
		word, d.ns, strings.ReplaceAll(word, "-", "_"), strings.ReplaceAll(word, "-", "_"), 10+r.IntN(90), 2+r.IntN(20),
		5+r.IntN(55), 500+r.IntN(9500))
	fmt.Fprintf(&y, "cache:\n  redis:\n    addresses:\n")
	for i := range 1 + r.IntN(3) {
		fmt.Fprintf(&y, "      - redis-%d.redis.%s.svc.cluster.local:6379\n", i, d.ns)
	}
	fmt.Fprintf(&y, "    db: %d\n    keyPrefix: \"%s:%s:\"\n    defaultTTL: %ds\n", r.IntN(16), d.labels["env"], word, 30+r.IntN(3600))
	fmt.Fprintf(&y, "upstreams:\n")
	for range 3 + r.IntN(6) {
		up := words[r.IntN(len(words))]
		fmt.Fprintf(&y, "  - name: %s\n    url: http://%s.%s.svc.cluster.local:8080\n    timeout: %dms\n    retries: %d\n"+
			"    circuitBreaker:\n      consecutiveErrors: %d\n      interval: %ds\n      baseEjectionTime: %ds\n",
			up, up, d.ns, 100+r.IntN(4900), r.IntN(4), 3+r.IntN(7), 5+r.IntN(25), 15+r.IntN(45))
	}
	fmt.Fprintf(&y, "features:\n")
	for i := range 6 + r.IntN(8) {
		fmt.Fprintf(&y, "  %s-%s-%d: %t\n", words[r.IntN(len(words))], []string{"v2", "beta", "rollout", "shadow"}[r.IntN(4)], i, r.IntN(2) == 0)
	}
	fmt.Fprintf(&y, "rateLimits:\n  perClient: %d\n  burst: %d\n  global: %d\nlogging:\n  level: %s\n  format: json\n"+
		"  sampling:\n    initial: %d\n    thereafter: %d\ntracing:\n  endpoint: http://otel-collector.observability:4317\n"+
		"  samplingRatio: 0.%02d\n  serviceName: %s\n", 10+r.IntN(990), 20+r.IntN(2000), 1000+r.IntN(99000),
		[]string{"info", "info", "warn", "debug"}[r.IntN(4)], 10+r.IntN(190), 10+r.IntN(990), r.IntN(100), d.name)
	fmt.Fprintf(&y, "checksums:\n  schema: sha256:%016x%016x\n  rules: sha256:%016x%016x\n", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())
	data := map[string]string{
		"config.yaml":  y.String(),
		"APP_ENV":      d.labels["env"],
		"LOG_LEVEL":    "info",
		"RELEASE":      d.labels["version"],
		"FEATURE_SEED": fmt.Sprintf("%d", r.Uint32()),
	}
	// Helm puts its chart's common labels on every object it renders: the Deployment's.
	labels := map[string]string{"helm.sh/chart": word + "-" + strings.TrimPrefix(d.labels["version"], "v")}
	for k, v := range d.labels {
		labels[k] = v
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns, Labels: labels,
			Annotations: map[string]string{"meta.helm.sh/release-name": d.name, "meta.helm.sh/release-namespace": d.ns}},
		Data: data,
	}
}

func runConfigMaps(args []string) error {
	fs := flag.NewFlagSet("configmaps", flag.ExitOnError)
	flags := addPlanFlags(fs) // the same as given to load: the same plan
	limit := fs.Int("max", 0, "at most this many ConfigMaps (0: as many as pods), whole Deployments, "+
		"the namespace the benchmark lists and the Deployment it reads first")
	plan, cs, err := flags.parse(fs, args)
	if err != nil {
		return err
	}
	workers, out := flags.workers, flags.out
	ctx := context.Background()
	start := time.Now()
	mid := plan[len(plan)/2]
	// What the benchmark reads first, so a limit never leaves it out.
	order := make([]int, 0, len(plan))
	for i, d := range plan {
		if d.ns == namespaceName(0) || d == mid {
			order = append(order, i)
		}
	}
	for i, d := range plan {
		if d.ns != namespaceName(0) && d != mid {
			order = append(order, i)
		}
	}
	type job struct{ d, j int }
	var jobs []job
	for _, i := range order {
		d := plan[i]
		if *limit > 0 && len(jobs) > 0 && len(jobs)+len(d.pods) > *limit {
			break
		}
		for j := range d.pods {
			jobs = append(jobs, job{i, j})
		}
	}
	var done, dataBytes atomic.Int64
	var lastMu sync.Mutex
	var lastRV int64
	var last objectRef
	stop := make(chan struct{})
	go progress(&done, len(jobs), "configmaps", stop)
	err = parallel(*workers, len(jobs), func(k int) error {
		d := plan[jobs[k].d]
		cm := configMapObject(d, jobs[k].j)
		got, err := created("configmap "+d.ns+"/"+cm.Name,
			func() (*corev1.ConfigMap, error) {
				return cs.CoreV1().ConfigMaps(d.ns).Create(ctx, cm, metav1.CreateOptions{})
			},
			func() (*corev1.ConfigMap, error) {
				return cs.CoreV1().ConfigMaps(d.ns).Get(ctx, cm.Name, metav1.GetOptions{})
			})
		if err != nil {
			return err
		}
		rv, err := strconv.ParseInt(got.ResourceVersion, 10, 64)
		if err != nil {
			return fmt.Errorf("configmap %s/%s: resourceVersion %q: %w", d.ns, cm.Name, got.ResourceVersion, err)
		}
		lastMu.Lock()
		if rv > lastRV {
			lastRV, last = rv, objectRef{d.ns, cm.Name}
		}
		lastMu.Unlock()
		for _, v := range cm.Data {
			dataBytes.Add(int64(len(v)))
		}
		done.Add(1)
		return nil
	})
	close(stop)
	if err != nil {
		return err
	}
	s := configMapSummary{ConfigMaps: len(jobs), DataBytes: dataBytes.Load(), Seconds: time.Since(start).Seconds(),
		Requests: int64(len(jobs)), ListNamespace: namespaceName(0), LastWritten: last}
	s.GetConfigMap = objectRef{mid.ns, configMapObject(mid, len(mid.pods)/2).Name}
	for _, d := range plan {
		if d.ns == s.ListNamespace {
			s.ListNamespaceN += len(d.pods)
		}
	}
	fmt.Fprintf(os.Stderr, "loader: %d configmaps (%d bytes of data) in %.1fs (%.0f/s)\n", s.ConfigMaps, s.DataBytes, s.Seconds,
		float64(s.ConfigMaps)/s.Seconds)
	if *out != "" {
		b, _ := json.MarshalIndent(s, "", "  ")
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	return nil
}
