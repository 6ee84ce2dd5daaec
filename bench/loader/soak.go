package main

// soak holds many watches open on k8sailor while it serves reads and the cluster changes, and
// checks that every watcher got every change exactly once:
//
//	loader soak --kubeconfig F --base URL --watches 10000 --reads-per-s 1000 --writes-per-s 20 \
//	    --duration 30m --out soak.json
//
// The watches are spread over the pods of each ReplicaSet (`pod-template-hash=H` in its
// namespace), so each write reaches the watchers of one group. Writes are label patches on
// those pods, made only once every watch is synced; the resourceVersion each patch returns is
// what its group's watchers must see, once each and in order. A stream that ends is resumed
// from the last version its watcher saw (the changes before its BOOKMARK are the ones it
// missed), as the dashboard does. After the writes stop the watchers are given time to drain,
// then each one's versions are compared with its group's writes: every watcher exactly.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type soakGroup struct {
	ns, hash string
	pods     []string
	mu       sync.Mutex
	written  []int64 // resourceVersions of the writes to this group's pods
}

type soakWatcher struct {
	group    *soakGroup
	mu       sync.Mutex
	versions []int64 // resourceVersions of the MODIFIED events after the first BOOKMARK
	last     string  // where a resumed stream starts
	synced   chan struct{}
	syncOnce sync.Once
}

type soakCounters struct {
	readsOK, readErrors   atomic.Int64
	readsNotStarted       atomic.Int64
	writesOK, writeErrors atomic.Int64
	watchErrors, resumes  atomic.Int64
	outOfOrder            atomic.Int64
	events                atomic.Int64
	readLatencyMu         sync.Mutex
	readLatencyMs         []float64
	firstErrorsMu         sync.Mutex
	firstErrors           []string
}

func (c *soakCounters) fail(counter *atomic.Int64, format string, args ...any) {
	counter.Add(1)
	c.firstErrorsMu.Lock()
	defer c.firstErrorsMu.Unlock()
	if len(c.firstErrors) < 20 {
		c.firstErrors = append(c.firstErrors, time.Now().UTC().Format(time.TimeOnly)+" "+fmt.Sprintf(format, args...))
	}
}

type soakResult struct {
	Watches, Groups                int
	DurationS                      float64
	Reads, ReadErrors              int64
	ReadsNotStarted                int64
	ReadP50Ms, ReadP99Ms           float64
	Writes, WriteErrors            int64
	WatchErrors, Resumes           int64
	OutOfOrder, Unexpected         int64
	Events                         int64
	ExpectedEvents                 int64
	Lost, Duplicated               int64
	WatchersChecked, WatchersWrong int
	SyncS, DrainS                  float64
	FirstErrors                    []string
}

func runSoak(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	base := fs.String("base", "", "k8sailor's API root, e.g. http://127.0.0.1:8088/k8sailor/v0")
	watches := fs.Int("watches", 10000, "watches held open")
	readsPerS := fs.Int("reads-per-s", 1000, "reads per second")
	writesPerS := fs.Int("writes-per-s", 20, "label patches per second")
	duration := fs.Duration("duration", 30*time.Minute, "how long reads and writes go on")
	drain := fs.Duration("drain", 60*time.Second, "longest wait for the watchers to get the last writes")
	out := fs.String("out", "", "write the figures here as JSON")
	fs.Parse(args)
	if *base == "" {
		return fmt.Errorf("need --base")
	}
	cs, err := client(*kubeconfig, float32(*writesPerS*2), *writesPerS*2)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	byGroup := map[string]*soakGroup{}
	var groups []*soakGroup
	for _, p := range pods.Items {
		hash := p.Labels["pod-template-hash"]
		if hash == "" {
			continue
		}
		key := p.Namespace + "/" + hash
		g := byGroup[key]
		if g == nil {
			g = &soakGroup{ns: p.Namespace, hash: hash}
			byGroup[key] = g
			groups = append(groups, g)
		}
		g.pods = append(g.pods, p.Name)
	}
	if len(groups) == 0 {
		return fmt.Errorf("no pods with a pod-template-hash label: load the cluster first")
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].ns+groups[i].hash < groups[j].ns+groups[j].hash })

	var c soakCounters
	// One connection per watch, as separate clients would hold; reads share a pool of their own.
	watchHTTP := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1,
		DisableCompression:  true,
	}}
	readHTTP := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}, Timeout: 10 * time.Second}

	stop := make(chan struct{})
	watchers := make([]*soakWatcher, *watches)
	var watchWG sync.WaitGroup
	t0 := time.Now()
	opening := make(chan struct{}, 64) // watches being opened at once
	for i := range watchers {
		w := &soakWatcher{group: groups[i%len(groups)], synced: make(chan struct{})}
		watchers[i] = w
		watchWG.Add(1)
		go func() {
			defer watchWG.Done()
			w.run(watchHTTP, *base, &c, stop, opening)
		}()
	}
	for _, w := range watchers {
		select {
		case <-w.synced:
		case <-time.After(10 * time.Minute):
			return fmt.Errorf("watches not synced after 10 minutes")
		}
	}
	syncS := time.Since(t0).Seconds()
	fmt.Fprintf(os.Stderr, "loader: %d watches synced in %.1f s over %d groups\n", *watches, syncS, len(groups))
	fmt.Println("soak: watches synced") // the script starts its RSS samples from here

	// Reads: a pacer hands out tickets, workers take them; a ticket not taken is a read lost.
	deadline := time.Now().Add(*duration)
	var loadWG sync.WaitGroup
	tickets := make(chan struct{}, *readsPerS)
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		defer close(tickets)
		pace(*readsPerS, deadline, func() {
			select {
			case tickets <- struct{}{}:
			default:
				// The load fell short of the rate (the readers all waiting): not an answer
				// k8sailor got wrong, so counted apart from the errors.
				c.readsNotStarted.Add(1)
			}
		})
	}()
	for r := 0; r < 256; r++ {
		loadWG.Add(1)
		go func(seed uint64) {
			defer loadWG.Done()
			rnd := rand.New(rand.NewPCG(seed, 7))
			for range tickets {
				g := groups[rnd.IntN(len(groups))]
				var path string
				switch rnd.IntN(3) {
				case 0:
					path = fmt.Sprintf("/pods/%s?namespace=%s", g.pods[rnd.IntN(len(g.pods))], g.ns)
				case 1:
					path = fmt.Sprintf("/pods?namespace=%s&labelSelector=%s", g.ns, url.QueryEscape("pod-template-hash="+g.hash))
				default:
					path = fmt.Sprintf("/deployments?namespace=%s", g.ns)
				}
				t := time.Now()
				if _, err := get(readHTTP, *base+path); err != nil {
					c.fail(&c.readErrors, "read: %v", err)
					continue
				}
				c.readsOK.Add(1)
				c.readLatencyMu.Lock()
				c.readLatencyMs = append(c.readLatencyMs, ms(time.Since(t)))
				c.readLatencyMu.Unlock()
			}
		}(uint64(r))
	}
	// Writes: label patches in turn over every group's pods, each group's versions recorded.
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		run := time.Now().UnixNano() % 1_000_000
		n := 0
		pace(*writesPerS, deadline, func() {
			g := groups[n%len(groups)]
			pod := g.pods[(n/len(groups))%len(g.pods)]
			patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"bench-soak":"r%d-w%d"}}}`, run, n))
			n++
			// Serial: each group's versions are recorded in the order they were made.
			var got *corev1.Pod
			err := retry("patch", func() (err error) {
				got, err = cs.CoreV1().Pods(g.ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{})
				return err
			})
			if err != nil {
				c.fail(&c.writeErrors, "patch %s/%s: %v", g.ns, pod, err)
				return
			}
			v, err := strconv.ParseInt(got.ResourceVersion, 10, 64)
			if err != nil {
				c.fail(&c.writeErrors, "patch %s/%s: resourceVersion %q", g.ns, pod, got.ResourceVersion)
				return
			}
			g.mu.Lock()
			g.written = append(g.written, v)
			g.mu.Unlock()
			c.writesOK.Add(1)
		})
	}()
	loadWG.Wait()
	fmt.Fprintf(os.Stderr, "loader: load done: %d reads, %d writes\n", c.readsOK.Load(), c.writesOK.Load())

	// Drain: until every watcher has as many changes as its group had writes.
	expected := func(w *soakWatcher) int {
		w.group.mu.Lock()
		defer w.group.mu.Unlock()
		return len(w.group.written)
	}
	t1 := time.Now()
	for _, w := range watchers {
		for {
			w.mu.Lock()
			n := len(w.versions)
			w.mu.Unlock()
			if n >= expected(w) || time.Since(t1) > *drain {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	drainS := time.Since(t1).Seconds()
	close(stop)
	watchWG.Wait()

	res := soakResult{Watches: *watches, Groups: len(groups), DurationS: duration.Seconds(), SyncS: syncS, DrainS: drainS,
		Reads: c.readsOK.Load(), ReadErrors: c.readErrors.Load(), ReadsNotStarted: c.readsNotStarted.Load(), Writes: c.writesOK.Load(), WriteErrors: c.writeErrors.Load(),
		WatchErrors: c.watchErrors.Load(), Resumes: c.resumes.Load(), OutOfOrder: c.outOfOrder.Load(),
		Events: c.events.Load()}
	for _, w := range watchers {
		want := map[int64]int{}
		w.group.mu.Lock()
		for _, v := range w.group.written {
			want[v]++
		}
		w.group.mu.Unlock()
		res.ExpectedEvents += int64(len(want))
		got := map[int64]int{}
		for _, v := range w.versions {
			got[v]++
		}
		wrong := false
		for v := range want {
			if got[v] == 0 {
				res.Lost++
				wrong = true
			}
		}
		for v, n := range got {
			if n > 1 {
				res.Duplicated += int64(n - 1)
				wrong = true
			}
			if want[v] == 0 {
				res.Unexpected++
				wrong = true
			}
		}
		res.WatchersChecked++
		if wrong {
			res.WatchersWrong++
		}
	}
	slices.Sort(c.readLatencyMs)
	res.ReadP50Ms, res.ReadP99Ms = pct(c.readLatencyMs, 50), pct(c.readLatencyMs, 99)
	res.FirstErrors = c.firstErrors
	fmt.Fprintf(os.Stderr, "loader: soak: %d events (%d expected), %d lost, %d duplicated, %d unexpected, %d out of order; "+
		"%d read errors, %d write errors, %d watch errors, %d resumes\n", res.Events, res.ExpectedEvents, res.Lost, res.Duplicated,
		res.Unexpected, res.OutOfOrder, res.ReadErrors, res.WriteErrors, res.WatchErrors, res.Resumes)
	b, _ := json.MarshalIndent(res, "", "  ")
	if *out != "" {
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	os.Stdout.Write(append(b, '\n'))
	return nil
}

// pace calls f `perS` times a second, evenly, until the deadline.
func pace(perS int, deadline time.Time, f func()) {
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * time.Second / time.Duration(perS))
		if at.After(deadline) {
			return
		}
		time.Sleep(time.Until(at))
		f()
	}
}

// run holds the watcher's stream open until stop, resuming it from the last version seen
// whenever it ends.
func (w *soakWatcher) run(c *http.Client, base string, counters *soakCounters, stop chan struct{}, opening chan struct{}) {
	path := fmt.Sprintf("%s/pods?namespace=%s&watch=true&labelSelector=%s", base, w.group.ns,
		url.QueryEscape("pod-template-hash="+w.group.hash))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	first := true
	for {
		select {
		case <-stop:
			return
		default:
		}
		u := path
		if w.last != "" {
			u += "&resourceVersion=" + w.last
		}
		opening <- struct{}{}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("Accept", "application/x-ndjson")
		resp, err := c.Do(req)
		<-opening
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			counters.fail(&counters.watchErrors, "watch: %v", err)
			time.Sleep(time.Second)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			resp.Body.Close()
			counters.fail(&counters.watchErrors, "watch %s: %s: %s", u, resp.Status, body)
			time.Sleep(time.Second)
			continue
		}
		if !first {
			counters.resumes.Add(1)
		}
		first = false
		w.read(resp.Body, counters)
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
	}
}

// read applies one stream's events until it ends.
func (w *soakWatcher) read(body io.Reader, counters *soakCounters) {
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	synced := false
	resuming := w.last != ""
	for lines.Scan() {
		var event struct {
			Type   string `json:"type"`
			Object struct {
				ResourceVersion string `json:"resourceVersion"`
				Code            int    `json:"code"`
				Error           string `json:"error"`
			} `json:"object"`
		}
		if err := json.Unmarshal(lines.Bytes(), &event); err != nil {
			counters.fail(&counters.watchErrors, "watch event: %v: %.200s", err, lines.Text())
			return
		}
		switch event.Type {
		case "BOOKMARK":
			synced = true
			w.last = event.Object.ResourceVersion
			w.syncOnce.Do(func() { close(w.synced) })
		case "ERROR":
			counters.fail(&counters.watchErrors, "watch ERROR event: %d %s", event.Object.Code, event.Object.Error)
			return
		case "ADDED", "MODIFIED", "DELETED":
			// The initial objects of a fresh watch come before its first BOOKMARK; after it (or on
			// a resumed stream, from the start) every event is a change.
			if !synced && !resuming {
				continue
			}
			v, err := strconv.ParseInt(event.Object.ResourceVersion, 10, 64)
			if err != nil {
				counters.fail(&counters.watchErrors, "watch event without a numeric resourceVersion: %.200s", lines.Text())
				continue
			}
			counters.events.Add(1)
			w.mu.Lock()
			if n := len(w.versions); n > 0 && v <= w.versions[n-1] {
				counters.fail(&counters.outOfOrder, "%s/%s: %d after %d", w.group.ns, w.group.hash, v, w.versions[n-1])
			}
			w.versions = append(w.versions, v)
			w.mu.Unlock()
			w.last = event.Object.ResourceVersion
		}
	}
}
