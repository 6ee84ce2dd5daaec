// Command loader fills a bare control plane (no kube-controller-manager) with a realistic
// scale for the benchmarks, and measures write-to-visible latency of read caches.
//
//	loader load    --kubeconfig F --namespaces 20 --deployments 1000 --pods 10000 --summary out.json
//	loader configmaps --kubeconfig F --namespaces 20 --deployments 1000 --pods 10000 --summary out.json
//	loader visible --kubeconfig F --pods ns/name,... --writes 200 --target NAME=URL ... --out out.json
//	loader soak    --kubeconfig F --base URL --watches 10000 --reads-per-s 1000 --writes-per-s 20 --duration 30m
//	loader watchers --kubeconfig F --target URL --namespace NS --pod NAME --watchers 10000 --changes 20 --out out.json
//
// load creates, per namespace, the `default` ServiceAccount (the ServiceAccount admission plugin
// rejects pods without it, and no controller makes it here), then Deployments, their
// ReplicaSet and Pods with controller ownerReferences and the pod-template-hash label, and sets
// every status through the status subresource: most pods Running and Ready, some Pending
// (unschedulable), some in CrashLoopBackOff with restarts. Everything is deterministic for a
// given seed. The summary names the objects the benchmark reads.
//
// configmaps adds, for the same plan (same flags and seed), as many ConfigMaps to each
// Deployment as it has pods, so each namespace holds as many ConfigMaps as Pods: the
// Deployment's `NAME-config` and kustomize-style `NAME-config-HASH` generations of it, each a
// config.yaml of 3-4 KiB and a few plain keys, about the bytes a pod takes. It is a step of its
// own so the benchmark can measure memory per pod before they exist.
//
// visible patches a label on pods through the API and polls every target's single-pod read
// (URL with {namespace} and {name} placeholders) until the new value shows, all targets at once,
// so they see the same writes.
//
// watchers (watchers.go) opens many watches of one pod over HTTP/2 on one server and times
// each label patch's event at every watcher.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loader load|configmaps|visible|soak|watchers [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "load":
		err = runLoad(os.Args[2:])
	case "configmaps":
		err = runConfigMaps(os.Args[2:])
	case "visible":
		err = runVisible(os.Args[2:])
	case "soak":
		err = runSoak(os.Args[2:])
	case "watchers":
		err = runWatchers(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want load, configmaps, visible, soak or watchers)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loader: error:", err)
		os.Exit(1)
	}
}

func client(kubeconfig string, qps float32, burst int) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = qps, burst
	// Protobuf is cheaper for the apiserver to decode and encode: loading is about speed.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "k8sailor-bench-loader"
	return kubernetes.NewForConfig(cfg)
}

// retry runs f until it succeeds, a non-transient error occurs, or attempts run out. The
// pauses grow to 10 s and add up to about two minutes: at 150,000 pods and as many ConfigMaps
// the apiserver has stalled long enough for client-go's HTTP/2 health check to drop the
// connection ("client connection lost"), and the load must outlast that, not end the run.
func retry(what string, f func() error) error {
	var err error
	for attempt := 0; attempt < 16; attempt++ {
		if err = f(); err == nil {
			return nil
		}
		if !transient(err) {
			break
		}
		time.Sleep(min(time.Duration(50<<attempt)*time.Millisecond, 10*time.Second))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// transient: an answer or a lost connection that a later attempt may not meet.
func transient(err error) bool {
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) {
		return true
	}
	msg := err.Error()
	for _, lost := range []string{"connection reset", "client connection lost", "connection refused", "EOF", "i/o timeout", "TLS handshake timeout"} {
		if strings.Contains(msg, lost) {
			return true
		}
	}
	return false
}

// created runs create with retry; when a retried create finds the object already there (an
// earlier attempt succeeded but its answer was lost to a timeout), the object is read instead.
func created[T any](what string, create func() (T, error), get func() (T, error)) (T, error) {
	var obj T
	retried := false
	err := retry(what, func() (err error) {
		obj, err = create()
		if err != nil && retried && apierrors.IsAlreadyExists(err) {
			obj, err = get()
		}
		retried = true
		return err
	})
	return obj, err
}

// ---------------------------------------------------------------------------------------------
// The plan: every object decided up front, so a Deployment's status can count its ready pods.

var (
	words = []string{"checkout", "cart", "payments", "ledger", "search", "catalog", "inventory",
		"shipping", "auth", "users", "notifications", "recommendations", "reviews", "pricing", "orders",
		"billing", "gateway", "profile", "media", "fraud-check"}
	products = []string{"shop", "platform", "data", "identity", "growth"}
	tiers    = []string{"frontend", "backend", "backend", "backend", "cache", "worker"}
	envs     = []string{"prod", "prod", "prod", "prod", "staging", "staging", "dev", "canary"}
	teams    = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
)

const (
	podRunning = iota
	podPending
	podCrashLoop
)

type podPlan struct {
	name     string
	state    int
	node     int
	ip       string
	restarts int32
}

type deployPlan struct {
	ns, name, hash string
	labels         map[string]string // on the Deployment and the pod template
	image          string
	sidecar        bool
	pods           []podPlan
}

func (d *deployPlan) ready() int32 {
	n := int32(0)
	for _, p := range d.pods {
		if p.state == podRunning {
			n++
		}
	}
	return n
}

const alphabet = "bcdfghjklmnpqrstvwxz2456789" // apimachinery's rand.SafeEncodeString alphabet

func podTemplateHash(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	digits := strconv.FormatUint(uint64(h.Sum32()), 10)
	out := make([]byte, len(digits))
	for i := range digits {
		out[i] = alphabet[int(digits[i])%len(alphabet)]
	}
	return string(out)
}

func suffix(r *rand.Rand) string {
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func namespaceName(i int) string { return fmt.Sprintf("bench-%02d", i+1) }

func makePlan(namespaces, deployments, pods int, seed uint64, nodes int) []*deployPlan {
	r := rand.New(rand.NewPCG(seed, 1))
	plan := make([]*deployPlan, deployments)
	ipSeq := 0
	for i := range plan {
		word := words[i%len(words)]
		name := fmt.Sprintf("%s-%04d", word, i)
		team := teams[r.IntN(len(teams))]
		version := fmt.Sprintf("v1.%d.%d", r.IntN(20), r.IntN(10))
		d := &deployPlan{
			ns:   namespaceName(i % namespaces),
			name: name,
			hash: podTemplateHash(name),
			labels: map[string]string{
				"app":                          name,
				"app.kubernetes.io/name":       word,
				"app.kubernetes.io/part-of":    products[i%len(products)],
				"app.kubernetes.io/version":    version,
				"app.kubernetes.io/managed-by": "helm",
				"tier":                         tiers[r.IntN(len(tiers))],
				"env":                          envs[r.IntN(len(envs))],
				"team":                         team,
				"version":                      version,
			},
			image:   fmt.Sprintf("registry.example.com/%s/%s:%s", team, word, version),
			sidecar: r.IntN(10) < 3,
		}
		n := pods / deployments
		if i < pods%deployments {
			n++
		}
		// Five random characters, as a ReplicaSet's pods get: at 30 pods a Deployment, two of
		// 150,000 pods do collide; the apiserver would refuse the second.
		taken := make(map[string]bool, n)
		for j := 0; j < n; j++ {
			podName := fmt.Sprintf("%s-%s-%s", name, d.hash, suffix(r))
			for taken[podName] {
				podName = fmt.Sprintf("%s-%s-%s", name, d.hash, suffix(r))
			}
			taken[podName] = true
			p := podPlan{name: podName, node: r.IntN(nodes)}
			switch x := r.IntN(100); {
			case x < 5:
				p.state = podPending
			case x < 10:
				p.state = podCrashLoop
				p.restarts = int32(1 + r.IntN(60))
			default:
				p.state = podRunning
				p.restarts = int32(max(0, r.IntN(12)-9))
			}
			if p.state != podPending {
				p.ip = fmt.Sprintf("10.%d.%d.%d", 64+(ipSeq>>16)%64, (ipSeq>>8)&255, ipSeq&255)
				ipSeq++
			}
			d.pods = append(d.pods, p)
		}
		plan[i] = d
	}
	return plan
}

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i+1) }
func nodeIP(i int) string   { return fmt.Sprintf("192.168.%d.%d", 10+i/250, 1+i%250) }

// ---------------------------------------------------------------------------------------------
// Objects.

func podSpec(d *deployPlan) corev1.PodSpec {
	word := d.labels["app.kubernetes.io/name"]
	containers := []corev1.Container{{
		Name:  word,
		Image: d.image,
		Args:  []string{"--config=/etc/" + word + "/config.yaml", "--log-format=json"},
		Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
		},
		Env: []corev1.EnvVar{
			{Name: "APP_ENV", Value: d.labels["env"]},
			{Name: "APP_NAME", Value: d.name},
			{Name: "LOG_LEVEL", Value: "info"},
			{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability:4317"},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}}, PeriodSeconds: 10},
		LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromString("http")}}, PeriodSeconds: 20, FailureThreshold: 3},
		VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + word, ReadOnly: true}},
	}}
	if d.sidecar {
		containers = append(containers, corev1.Container{
			Name:  "envoy",
			Image: "envoyproxy/envoy:v1.31.2",
			Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
		})
	}
	return corev1.PodSpec{
		Containers: containers,
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: d.name + "-config"}}}}},
		TerminationGracePeriodSeconds: ptr(int64(30)),
	}
}

func ptr[T any](v T) *T { return &v }

func podLabels(d *deployPlan) map[string]string {
	l := make(map[string]string, len(d.labels)+1)
	for k, v := range d.labels {
		l[k] = v
	}
	l["pod-template-hash"] = d.hash
	return l
}

func deploymentObject(d *deployPlan) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: d.ns, Labels: d.labels,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1", "meta.helm.sh/release-name": d.name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(len(d.pods))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: d.labels, Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
				Spec:       podSpec(d),
			},
		},
	}
}

func controllerRef(kind string, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid,
		Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
}

func replicaSetObject(d *deployPlan, owner types.UID) *appsv1.ReplicaSet {
	labels := podLabels(d)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.name + "-" + d.hash, Namespace: d.ns, Labels: labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1", "deployment.kubernetes.io/desired-replicas": strconv.Itoa(len(d.pods))},
			OwnerReferences: controllerRef("Deployment", d.name, owner)},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(len(d.pods))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.name, "pod-template-hash": d.hash}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
				Spec:       podSpec(d),
			},
		},
	}
}

func podObject(d *deployPlan, p *podPlan, rsName string, rsUID types.UID) *corev1.Pod {
	spec := podSpec(d)
	if p.state != podPending {
		spec.NodeName = nodeName(p.node)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: d.ns, GenerateName: rsName + "-",
			Labels:          podLabels(d),
			Annotations:     map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: controllerRef("ReplicaSet", rsName, rsUID)},
		Spec: spec,
	}
}

func podStatus(d *deployPlan, p *podPlan, pod *corev1.Pod, started metav1.Time) corev1.PodStatus {
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		s := corev1.ConditionTrue
		if !ok {
			s = corev1.ConditionFalse
		}
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: started}
	}
	if p.state == podPending {
		return corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message:            "0/50 nodes are available: 50 Insufficient cpu. preemption: 0/50 nodes are available: 50 No preemption victims found for incoming pod.",
				LastTransitionTime: started}},
			QOSClass: corev1.PodQOSBurstable,
		}
	}
	ready := p.state == podRunning
	var statuses []corev1.ContainerStatus
	for i, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "docker-pullable://" + c.Image + "@sha256:" + fmt.Sprintf("%064x", fnv64(c.Image)),
			ContainerID: fmt.Sprintf("containerd://%064x", fnv64(pod.Name+c.Name)), Started: ptr(true), Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}
		if i == 0 {
			cs.RestartCount = p.restarts
			if p.restarts > 0 {
				cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 1, Reason: "Error", StartedAt: started, FinishedAt: started, ContainerID: cs.ContainerID}}
			}
			if p.state == podCrashLoop {
				cs.Ready, cs.Started = false, ptr(false)
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
					Message: fmt.Sprintf("back-off 5m0s restarting failed container=%s pod=%s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)}}
			}
		}
		statuses = append(statuses, cs)
	}
	reason := ""
	if !ready {
		reason = "ContainersNotReady"
	}
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			cond("PodReadyToStartContainers", true, ""), cond(corev1.PodInitialized, true, ""),
			cond(corev1.ContainersReady, ready, reason), cond(corev1.PodReady, ready, reason),
			cond(corev1.PodScheduled, true, ""),
		},
		HostIP: nodeIP(p.node), HostIPs: []corev1.HostIP{{IP: nodeIP(p.node)}},
		PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}},
		StartTime: &started, ContainerStatuses: statuses, QOSClass: corev1.PodQOSBurstable,
	}
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// ---------------------------------------------------------------------------------------------
// load

type summary struct {
	Namespaces   []string `json:"namespaces"`
	Deployments  int      `json:"deployments"`
	ReplicaSets  int      `json:"replicaSets"`
	Pods         int      `json:"pods"`
	PodsRunning  int      `json:"podsRunning"`
	PodsPending  int      `json:"podsPending"`
	PodsCrashing int      `json:"podsCrashLoopBackOff"`
	Seconds      float64  `json:"seconds"`
	Requests     int64    `json:"requests"`
	// What the benchmark reads.
	GetDeployment  objectRef `json:"getDeployment"`
	GetPod         objectRef `json:"getPod"`
	ListNamespace  string    `json:"listNamespace"`
	ListNamespaceN int       `json:"listNamespacePods"`
	LabelSelector  string    `json:"labelSelector"`
	LabelSelectorN int       `json:"labelSelectorPods"`
	ProbePods      []string  `json:"probePods"` // ns/name, running pods for the visibility probe
}

type objectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// planFlags are the flags of the commands that write the plan's objects: `configmaps` must be
// given what `load` was, so both make the same plan.
type planFlags struct {
	kubeconfig, out               *string
	namespaces, deployments, pods *int
	workers                       *int
	seed                          *uint64
}

func addPlanFlags(fs *flag.FlagSet) planFlags {
	return planFlags{
		kubeconfig:  fs.String("kubeconfig", "", "kubeconfig of the cluster to fill"),
		namespaces:  fs.Int("namespaces", 20, "namespaces"),
		deployments: fs.Int("deployments", 1000, "Deployments (one ReplicaSet each)"),
		pods:        fs.Int("pods", 10000, "Pods, spread evenly over the Deployments"),
		workers:     fs.Int("workers", 48, "concurrent requests"),
		seed:        fs.Uint64("seed", 1, "random seed"),
		out:         fs.String("summary", "", "write a JSON summary here"),
	}
}

// parse parses args into f and returns the plan they describe and a client for writing it.
func (f planFlags) parse(fs *flag.FlagSet, args []string) ([]*deployPlan, *kubernetes.Clientset, error) {
	fs.Parse(args)
	if *f.namespaces < 1 || *f.deployments < *f.namespaces || *f.pods < *f.deployments {
		return nil, nil, fmt.Errorf("need namespaces >= 1, deployments >= namespaces, pods >= deployments")
	}
	cs, err := client(*f.kubeconfig, 1e6, 1e6)
	if err != nil {
		return nil, nil, err
	}
	return makePlan(*f.namespaces, *f.deployments, *f.pods, *f.seed, 50), cs, nil
}

func runLoad(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	flags := addPlanFlags(fs)
	plan, cs, err := flags.parse(fs, args)
	if err != nil {
		return err
	}
	namespaces, workers, out := flags.namespaces, flags.workers, flags.out
	ctx := context.Background()
	start := time.Now()
	var requests atomic.Int64

	// Namespaces and their default ServiceAccount.
	nsNames := make([]string, *namespaces)
	for i := range nsNames {
		nsNames[i] = namespaceName(i)
	}
	err = parallel(*workers, len(nsNames), func(i int) error {
		ns := nsNames[i]
		requests.Add(2)
		if err := retry("namespace "+ns, func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
				Labels: map[string]string{"purpose": "k8sailor-bench"}}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
		return retry("serviceaccount "+ns+"/default", func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			return err
		})
	})
	if err != nil {
		return err
	}

	// Deployments and ReplicaSets (with statuses), then every pod of every ReplicaSet.
	type rsRef struct {
		name string
		uid  types.UID
	}
	rsOf := make([]rsRef, len(plan))
	now := metav1.NewTime(time.Now().Add(-2 * time.Hour).Truncate(time.Second))
	err = parallel(*workers, len(plan), func(i int) error {
		d := plan[i]
		ready := d.ready()
		n := int32(len(d.pods))
		dep, err := created("deployment "+d.ns+"/"+d.name,
			func() (*appsv1.Deployment, error) {
				return cs.AppsV1().Deployments(d.ns).Create(ctx, deploymentObject(d), metav1.CreateOptions{})
			},
			func() (*appsv1.Deployment, error) {
				return cs.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
			})
		if err != nil {
			return err
		}
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n,
			ReadyReplicas: ready, AvailableReplicas: ready, UnavailableReplicas: n - ready,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: boolCond(ready == n), Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now,
					Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", d.name+"-"+d.hash)},
			}}
		if err := retry("deployment status "+d.ns+"/"+d.name, func() error {
			_, err := cs.AppsV1().Deployments(d.ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
		rsObject := replicaSetObject(d, dep.UID)
		rs, err := created("replicaset "+d.ns+"/"+d.name,
			func() (*appsv1.ReplicaSet, error) {
				return cs.AppsV1().ReplicaSets(d.ns).Create(ctx, rsObject, metav1.CreateOptions{})
			},
			func() (*appsv1.ReplicaSet, error) {
				return cs.AppsV1().ReplicaSets(d.ns).Get(ctx, rsObject.Name, metav1.GetOptions{})
			})
		if err != nil {
			return err
		}
		rs.Status = appsv1.ReplicaSetStatus{Replicas: n, FullyLabeledReplicas: n, ReadyReplicas: ready, AvailableReplicas: ready, ObservedGeneration: rs.Generation}
		if err := retry("replicaset status "+d.ns+"/"+rs.Name, func() error {
			_, err := cs.AppsV1().ReplicaSets(d.ns).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
		requests.Add(4)
		rsOf[i] = rsRef{rs.Name, rs.UID}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "loader: %d namespaces, %d deployments and replicasets in %.1fs\n", len(nsNames), len(plan), time.Since(start).Seconds())

	type podJob struct{ d, p int }
	var jobs []podJob
	for i, d := range plan {
		for j := range d.pods {
			jobs = append(jobs, podJob{i, j})
		}
	}
	var done atomic.Int64
	stop := make(chan struct{})
	go progress(&done, len(jobs), "pods", stop)
	podsStart := time.Now()
	err = parallel(*workers, len(jobs), func(k int) error {
		d := plan[jobs[k].d]
		p := &d.pods[jobs[k].p]
		rs := rsOf[jobs[k].d]
		pod, err := created("pod "+d.ns+"/"+p.name,
			func() (*corev1.Pod, error) {
				return cs.CoreV1().Pods(d.ns).Create(ctx, podObject(d, p, rs.name, rs.uid), metav1.CreateOptions{})
			},
			func() (*corev1.Pod, error) {
				return cs.CoreV1().Pods(d.ns).Get(ctx, p.name, metav1.GetOptions{})
			})
		if err != nil {
			return err
		}
		pod.Status = podStatus(d, p, pod, now)
		if err := retry("pod status "+d.ns+"/"+p.name, func() error {
			_, err := cs.CoreV1().Pods(d.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
		requests.Add(2)
		done.Add(1)
		return nil
	})
	close(stop)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "loader: %d pods in %.1fs (%.0f pods/s)\n", len(jobs), time.Since(podsStart).Seconds(), float64(len(jobs))/time.Since(podsStart).Seconds())

	s := summary{Namespaces: nsNames, Deployments: len(plan), ReplicaSets: len(plan), Pods: len(jobs),
		Seconds: time.Since(start).Seconds(), Requests: requests.Load()}
	for _, d := range plan {
		for _, p := range d.pods {
			switch p.state {
			case podRunning:
				s.PodsRunning++
			case podPending:
				s.PodsPending++
			default:
				s.PodsCrashing++
			}
		}
	}
	// Reads: a Deployment in the middle, the first namespace, the pods of one app picked by label
	// across every namespace (a dashboard's "pods of app X").
	mid := plan[len(plan)/2]
	s.GetDeployment = objectRef{mid.ns, mid.name}
	s.GetPod = objectRef{mid.ns, mid.pods[len(mid.pods)/2].name}
	s.ListNamespace = nsNames[0]
	for _, d := range plan {
		if d.ns == s.ListNamespace {
			s.ListNamespaceN += len(d.pods)
		}
	}
	sel := plan[len(plan)/3]
	s.LabelSelector = fmt.Sprintf("app=%s,tier=%s", sel.name, sel.labels["tier"])
	s.LabelSelectorN = len(sel.pods)
	for i := 0; len(s.ProbePods) < 20 && i < len(plan); i++ {
		d := plan[(i*7919)%len(plan)]
		for _, p := range d.pods {
			if p.state == podRunning {
				s.ProbePods = append(s.ProbePods, d.ns+"/"+p.name)
				break
			}
		}
	}
	fmt.Fprintf(os.Stderr, "loader: done in %.1fs, %d requests (%.0f/s)\n", s.Seconds, s.Requests, float64(s.Requests)/s.Seconds)
	if *out != "" {
		b, _ := json.MarshalIndent(s, "", "  ")
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	return nil
}

func boolCond(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// parallel runs f(0..n-1) on `workers` goroutines and returns the first error (then stops
// handing out work).
func parallel(workers, n int, f func(int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func progress(done *atomic.Int64, total int, what string, stop chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			n := done.Load()
			fmt.Fprintf(os.Stderr, "loader: %d/%d %s (%.0f/s)\n", n, total, what, float64(n)/time.Since(start).Seconds())
		}
	}
}

// ---------------------------------------------------------------------------------------------
// visible

type target struct {
	name, url string
}

type visibleResult struct {
	Writes    int                  `json:"writes"`
	PatchMs   []float64            `json:"patchMs"`
	VisibleMs map[string][]float64 `json:"visibleMs"`
}

func runVisible(args []string) error {
	fs := flag.NewFlagSet("visible", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	podList := fs.String("pods", "", "comma-separated ns/name of pods to patch in turn")
	writes := fs.Int("writes", 200, "label patches")
	gap := fs.Duration("gap", 20*time.Millisecond, "pause between one write being visible everywhere and the next")
	poll := fs.Duration("poll", time.Millisecond, "pause between two polls of one target")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on a write after this long")
	out := fs.String("out", "", "write the raw figures here as JSON")
	var targets []target
	fs.Func("target", "NAME=URL with {namespace} and {name}; repeat", func(v string) error {
		name, url, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("want NAME=URL")
		}
		targets = append(targets, target{name, url})
		return nil
	})
	fs.Parse(args)
	pods := strings.Split(*podList, ",")
	if *podList == "" || len(targets) == 0 {
		return fmt.Errorf("need --pods and at least one --target")
	}
	cs, err := client(*kubeconfig, 1000, 1000)
	if err != nil {
		return err
	}
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 5 * time.Second}
	run := time.Now().UnixNano() % 1_000_000
	res := visibleResult{Writes: *writes, VisibleMs: map[string][]float64{}}
	ctx := context.Background()
	for i := 0; i < *writes; i++ {
		ns, name, _ := strings.Cut(pods[i%len(pods)], "/")
		value := fmt.Sprintf("r%d-w%d", run, i)
		needle := []byte(`"bench-probe":"` + value + `"`)
		patch := []byte(`{"metadata":{"labels":{"bench-probe":"` + value + `"}}}`)

		var wg sync.WaitGroup
		seen := make([]time.Duration, len(targets))
		errs := make([]error, len(targets))
		begin := make(chan struct{})
		var t0 time.Time
		for ti, t := range targets {
			url := strings.NewReplacer("{namespace}", ns, "{name}", name).Replace(t.url)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-begin
				for {
					body, err := get(httpc, url)
					if err != nil {
						errs[ti] = fmt.Errorf("%s: %w", t.name, err)
						return
					}
					if bytes.Contains(body, needle) {
						seen[ti] = time.Since(t0)
						return
					}
					if time.Since(t0) > *timeout {
						errs[ti] = fmt.Errorf("%s: write %d (%s/%s bench-probe=%s) not visible after %s", t.name, i, ns, name, value, *timeout)
						return
					}
					time.Sleep(*poll)
				}
			}()
		}
		t0 = time.Now()
		close(begin)
		_, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		patchRTT := time.Since(t0)
		wg.Wait()
		if err != nil {
			return fmt.Errorf("patch %s/%s: %w", ns, name, err)
		}
		for ti, t := range targets {
			if errs[ti] != nil {
				return errs[ti]
			}
			res.VisibleMs[t.name] = append(res.VisibleMs[t.name], ms(seen[ti]))
		}
		res.PatchMs = append(res.PatchMs, ms(patchRTT))
		time.Sleep(*gap)
	}
	for _, t := range targets {
		v := slices.Clone(res.VisibleMs[t.name])
		slices.Sort(v)
		fmt.Fprintf(os.Stderr, "loader: %s write-to-visible p50 %.2f ms, p99 %.2f ms over %d writes\n", t.name, pct(v, 50), pct(v, 99), len(v))
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if *out != "" {
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	os.Stdout.Write(append(b, '\n'))
	return nil
}

func get(c *http.Client, url string) ([]byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return body, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the nearest-rank percentile of sorted values.
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}
