// Command clientgo runs client-go's shared informers the way controllers do, against the
// server of a kubeconfig, so that an end-to-end test can compare what they end up holding
// when pointed at k8sailor and at the apiserver.
//
//	clientgo --kubeconfig F --namespace NS
//
// It runs typed informers of Pods and ConfigMaps and a metadata informer of ConfigMaps (the
// garbage collector's kind: PartialObjectMetadata) in NS. Once all have synced it prints
// `synced`; then for each line `dump` read on stdin it prints every informer's store as one
// JSON line; it exits when stdin closes. client-go reads KUBE_FEATURE_WatchListClient
// (WatchList is on by default in 1.35).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// entry is what the test compares of each object: which one, and at which version.
type entry struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

func entries(store cache.Store) ([]entry, error) {
	out := []entry{}
	for _, obj := range store.List() {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, entry{m.GetNamespace(), m.GetName(), m.GetResourceVersion()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	namespace := flag.String("namespace", "", "namespace to watch")
	flag.Parse()
	if *kubeconfig == "" || *namespace == "" {
		log.Fatal("clientgo: --kubeconfig and --namespace are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("clientgo: %v", err)
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("clientgo: %v", err)
	}
	metaClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("clientgo: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	factory := informers.NewSharedInformerFactoryWithOptions(typed, 0, informers.WithNamespace(*namespace))
	metaFactory := metadatainformer.NewFilteredSharedInformerFactory(metaClient, 0, *namespace, nil)
	stores := map[string]cache.SharedIndexInformer{
		"pods":                factory.Core().V1().Pods().Informer(),
		"configmaps":          factory.Core().V1().ConfigMaps().Informer(),
		"configmaps-metadata": metaFactory.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps")).Informer(),
	}
	factory.Start(ctx.Done())
	metaFactory.Start(ctx.Done())
	synced := make([]cache.InformerSynced, 0, len(stores))
	for _, informer := range stores {
		synced = append(synced, informer.HasSynced)
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 60*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		log.Fatal("clientgo: the informers did not sync within 60s")
	}
	fmt.Println("synced")

	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		if lines.Text() != "dump" {
			continue
		}
		dump := map[string][]entry{}
		for name, informer := range stores {
			listed, err := entries(informer.GetStore())
			if err != nil {
				log.Fatalf("clientgo: %s: %v", name, err)
			}
			dump[name] = listed
		}
		out, err := json.Marshal(dump)
		if err != nil {
			log.Fatalf("clientgo: %v", err)
		}
		fmt.Println(string(out))
	}
}
