// Command baseline is the benchmark's reference read cache: client-go's shared informer
// factory and listers used the way their documentation shows, serving the reads k8sailor
// serves as plain JSON (the same DTO fields, built per request from the cached objects).
//
//	baseline --kubeconfig F [--listen 127.0.0.1:0] [--strip-managed-fields]
//	         [--resources GROUP/VERSION/RESOURCE,...]
//
// It informs Deployments, ReplicaSets, Pods and ConfigMaps (the reads below), and with
// --resources every resource named (bench/run passes what k8sailor serves, so both start
// the same watches). Once every informer has synced and the port is bound it prints
// `baseline listening on http://ADDR` on stdout.
//
//	GET /startup                                  how long start-up took, by phase
//	GET /ping
//	GET /deployments/{name}?namespace=NS          one Deployment
//	GET /pods?namespace=NS&labelSelector=SEL      pods of a namespace (all if empty), by selector
//	GET /pods/{name}?namespace=NS                 one Pod
//	GET /configmaps?namespace=NS                  ConfigMaps of a namespace
//	GET /configmaps/{name}?namespace=NS           one ConfigMap
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// startupReport is how long start-up took, in seconds from the process's start (connect,
// ready) or from the informers' start (each resource synced, all of them listed).
type startupReport struct {
	ConnectS float64            `json:"connectS"`
	SyncedS  map[string]float64 `json:"syncedS"`
	ListedS  float64            `json:"listedS"`
	ReadyS   float64            `json:"readyS"`
}

type server struct {
	deployments appslisters.DeploymentLister
	replicaSets appslisters.ReplicaSetLister
	pods        corelisters.PodLister
	configMaps  corelisters.ConfigMapLister
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	strip := flag.Bool("strip-managed-fields", false, "drop managedFields before caching (informers.WithTransform)")
	resources := flag.String("resources", "", "GROUP/VERSION/RESOURCE,... to inform as well (core: /v1/pods)")
	flag.Parse()
	began := time.Now()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("baseline: %v", err)
	}
	cfg.UserAgent = "k8sailor-bench-baseline"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("baseline: %v", err)
	}

	var opts []informers.SharedInformerOption
	if *strip {
		opts = append(opts, informers.WithTransform(func(obj any) (any, error) {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetManagedFields(nil)
			}
			return obj, nil
		}))
	}
	// No periodic resync: nothing here reconciles, and a resync only replays the cache.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	s := &server{
		deployments: factory.Apps().V1().Deployments().Lister(),
		replicaSets: factory.Apps().V1().ReplicaSets().Lister(),
		pods:        factory.Core().V1().Pods().Lister(),
		configMaps:  factory.Core().V1().ConfigMaps().Lister(),
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		log.Fatalf("baseline: %v", err)
	}
	startup := &startupReport{ConnectS: time.Since(began).Seconds(), SyncedS: map[string]float64{}}
	dynamicFactory := dynamicinformer.NewDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0)
	informed := map[string]cache.SharedIndexInformer{
		"deployments.apps": factory.Apps().V1().Deployments().Informer(),
		"replicasets.apps": factory.Apps().V1().ReplicaSets().Informer(),
		"pods":             factory.Core().V1().Pods().Informer(),
		"configmaps":       factory.Core().V1().ConfigMaps().Informer(),
	}
	for _, name := range strings.Split(*resources, ",") {
		if name == "" {
			continue
		}
		parts := strings.Split(name, "/")
		if len(parts) != 3 {
			log.Fatalf("baseline: --resources: %q is not GROUP/VERSION/RESOURCE", name)
		}
		gvr := schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		key := gvr.Resource
		if gvr.Group != "" {
			key += "." + gvr.Group
		}
		// Built-in kinds through their typed informers, as a client-go program has them;
		// anything else (a custom resource) through the dynamic client.
		if generic, err := factory.ForResource(gvr); err == nil {
			informed[key] = generic.Informer()
		} else {
			informed[key] = dynamicFactory.ForResource(gvr).Informer()
		}
	}
	stop := make(chan struct{})
	started := time.Now()
	factory.Start(stop)
	dynamicFactory.Start(stop)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for key, informer := range informed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !cache.WaitForCacheSync(stop, informer.HasSynced) {
				log.Fatalf("baseline: cache of %s did not sync", key)
			}
			mu.Lock()
			startup.SyncedS[key] = time.Since(started).Seconds()
			mu.Unlock()
		}()
	}
	wg.Wait()
	startup.ListedS = time.Since(started).Seconds()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /startup", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, startup) })
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("pong")) })
	mux.HandleFunc("GET /deployments/{name}", s.getDeployment)
	mux.HandleFunc("GET /pods", s.listPods)
	mux.HandleFunc("GET /pods/{name}", s.getPod)
	mux.HandleFunc("GET /configmaps", s.listConfigMaps)
	mux.HandleFunc("GET /configmaps/{name}", s.getConfigMap)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("baseline: %v", err)
	}
	startup.ReadyS = time.Since(began).Seconds()
	fmt.Printf("baseline listening on http://%s\n", ln.Addr())
	os.Stdout.Sync()

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatalf("baseline: %v", err)
	}
	close(stop)
	factory.Shutdown()
}

func namespaceOf(r *http.Request) string {
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	return metav1.NamespaceDefault
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

func writeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if apierrors.IsNotFound(err) {
		code = http.StatusNotFound
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func (s *server) getDeployment(w http.ResponseWriter, r *http.Request) {
	d, err := s.deployments.Deployments(namespaceOf(r)).Get(r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, deploymentDTO(d))
}

func (s *server) getPod(w http.ResponseWriter, r *http.Request) {
	p, err := s.pods.Pods(namespaceOf(r)).Get(r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.podDTO(p))
}

func (s *server) listPods(w http.ResponseWriter, r *http.Request) {
	sel := labels.Everything()
	if q := r.URL.Query().Get("labelSelector"); q != "" {
		var err error
		if sel, err = labels.Parse(q); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
	}
	var pods []*corev1.Pod
	var err error
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		pods, err = s.pods.Pods(ns).List(sel) // the namespace index
	} else {
		pods, err = s.pods.List(sel)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	out := make([]podDTO, len(pods))
	for i, p := range pods {
		out[i] = s.podDTO(p)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) getConfigMap(w http.ResponseWriter, r *http.Request) {
	c, err := s.configMaps.ConfigMaps(namespaceOf(r)).Get(r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, configMapDTO(c))
}

func (s *server) listConfigMaps(w http.ResponseWriter, r *http.Request) {
	cms, err := s.configMaps.ConfigMaps(namespaceOf(r)).List(labels.Everything())
	if err != nil {
		writeErr(w, err)
		return
	}
	sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
	out := make([]configMap, len(cms))
	for i, c := range cms {
		out[i] = configMapDTO(c)
	}
	writeJSON(w, http.StatusOK, out)
}

// ---------------------------------------------------------------------------------------------
// DTOs: the fields k8sailor answers with.

type deploymentStatus struct {
	Replicas            int32 `json:"replicas"`
	AvailableReplicas   int32 `json:"availableReplicas"`
	UnavailableReplicas int32 `json:"unavailableReplicas"`
}

type deployment struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	Replicas          int32             `json:"replicas"`
	Images            []string          `json:"images"`
	Status            deploymentStatus  `json:"status"`
	LabelSelector     map[string]string `json:"labelSelector"`
	Labels            map[string]string `json:"labels"`
	UID               string            `json:"uid"`
	CreationTimestamp string            `json:"creationTimestamp"`
	ResourceVersion   string            `json:"resourceVersion"`
	Ready             string            `json:"ready"`
	UpToDate          int32             `json:"upToDate"`
	Available         int32             `json:"available"`
}

type podStatus struct {
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type podDTO struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	Images            []string          `json:"images"`
	NodeName          string            `json:"nodeName"`
	NodeIP            string            `json:"nodeIp"`
	PodIP             string            `json:"podIp"`
	CreateTime        string            `json:"createTime"`
	Status            podStatus         `json:"status"`
	Labels            map[string]string `json:"labels"`
	UID               string            `json:"uid"`
	CreationTimestamp string            `json:"creationTimestamp"`
	ResourceVersion   string            `json:"resourceVersion"`
	Ready             string            `json:"ready"`
	StatusText        string            `json:"statusText"`
	Restarts          int32             `json:"restarts"`
	Deployment        string            `json:"deployment"`
}

func rfc3339(t metav1.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func images(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Image)
	}
	return out
}

func deploymentDTO(d *appsv1.Deployment) deployment {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	var sel map[string]string
	if d.Spec.Selector != nil {
		sel = d.Spec.Selector.MatchLabels
	}
	return deployment{
		Name: d.Name, Namespace: d.Namespace, Replicas: replicas,
		Images:        images(d.Spec.Template.Spec.Containers),
		Status:        deploymentStatus{d.Status.Replicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas},
		LabelSelector: sel, Labels: d.Labels, UID: string(d.UID),
		CreationTimestamp: rfc3339(d.CreationTimestamp), ResourceVersion: d.ResourceVersion,
		Ready:    fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas),
		UpToDate: d.Status.UpdatedReplicas, Available: d.Status.AvailableReplicas,
	}
}

func (s *server) podDTO(p *corev1.Pod) podDTO {
	ready, restarts := 0, int32(0)
	statusText := string(p.Status.Phase)
	if p.Status.Reason != "" {
		statusText = p.Status.Reason
	}
	for _, c := range p.Status.ContainerStatuses {
		restarts += c.RestartCount
		if c.Ready {
			ready++
		}
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			statusText = c.State.Waiting.Reason
		} else if c.State.Terminated != nil && c.State.Terminated.Reason != "" {
			statusText = c.State.Terminated.Reason
		}
	}
	if p.DeletionTimestamp != nil {
		statusText = "Terminating"
	}
	return podDTO{
		Name: p.Name, Namespace: p.Namespace, Images: images(p.Spec.Containers),
		NodeName: p.Spec.NodeName, NodeIP: p.Status.HostIP, PodIP: p.Status.PodIP,
		CreateTime: rfc3339(p.CreationTimestamp),
		Status:     podStatus{string(p.Status.Phase), p.Status.Reason, p.Status.Message},
		Labels:     p.Labels, UID: string(p.UID),
		CreationTimestamp: rfc3339(p.CreationTimestamp), ResourceVersion: p.ResourceVersion,
		Ready:      fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers)),
		StatusText: statusText, Restarts: restarts, Deployment: s.deploymentOf(p),
	}
}

// deploymentOf follows the controller ownerReferences Pod -> ReplicaSet -> Deployment.
func (s *server) deploymentOf(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return ""
	}
	rs, err := s.replicaSets.ReplicaSets(p.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return ""
	}
	if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
		return dref.Name
	}
	return ""
}

// configMap is what k8sailor answers for an object of a kind it serves generically: identity,
// labels and kubectl's cells (NAME, DATA, AGE), each cell tagged with its type.
type configMap struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	UID               string            `json:"uid"`
	Labels            map[string]string `json:"labels"`
	CreationTimestamp string            `json:"creationTimestamp"`
	ResourceVersion   string            `json:"resourceVersion"`
	Cells             []map[string]any  `json:"cells"`
}

func configMapDTO(c *corev1.ConfigMap) configMap {
	created := rfc3339(c.CreationTimestamp)
	return configMap{
		Name: c.Name, Namespace: c.Namespace, UID: string(c.UID), Labels: c.Labels,
		CreationTimestamp: created, ResourceVersion: c.ResourceVersion,
		Cells: []map[string]any{{"Text": c.Name}, {"Integer": len(c.Data) + len(c.BinaryData)}, {"Age": created}},
	}
}
