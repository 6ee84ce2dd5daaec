package main

// watchers holds many watches of one pod open on one server over HTTP/2, as many streams on
// each connection as the server's SETTINGS allow, then changes the pod and times each change
// from sending its patch to its event at every watcher:
//
//	loader watchers --kubeconfig F --target https://127.0.0.1:6443 --namespace NS --pod NAME \
//	    --watchers 10000 --changes 20 --out watchers.json
//
// Each watch is what `kubectl get pod NAME -w` and a client-go informer of one object open: a
// list of the pod by `fieldSelector=metadata.name=NAME`, then `watch=true` with that field
// selector from the list's resourceVersion (`allowWatchBookmarks=true`, JSON). A target URL
// of https is the apiserver: TLS with ALPN h2 and the kubeconfig's credentials; http is
// k8sailor's plain listener: h2c with prior knowledge. The changes are label patches through
// the apiserver, one at a time: the next is sent once every watcher has the last one. Change
// k sets the label `bench-watchers=c<k>`, so each event names its change; every watcher must
// get every change exactly once, with the resourceVersion its patch returned, and nothing
// else (the pod is the run's own: nothing else writes it). Every phase is bounded: a watcher
// that stalls, ends or errs fails the run with a message naming it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// watchLabel is the label each change sets; its value `c<k>` names change k.
const watchLabel = "bench-watchers"

type watchersResult struct {
	Target               string    `json:"target"`
	Protocol             string    `json:"protocol"`
	Watchers             int       `json:"watchers"`
	Connections          int       `json:"connections"`
	StreamsPerConnection uint32    `json:"streamsPerConnection"`
	ListResourceVersion  string    `json:"listResourceVersion"`
	OpenS                float64   `json:"openS"`
	Changes              int       `json:"changes"`
	PatchMs              []float64 `json:"patchMs"`
	// Per change, the time from sending its patch until the last watcher had it.
	AllMs []float64 `json:"allMs"`
	// Over every (watcher, change): sending the patch to the watcher's event.
	Deliveries int     `json:"deliveries"`
	P50Ms      float64 `json:"p50Ms"`
	P90Ms      float64 `json:"p90Ms"`
	P99Ms      float64 `json:"p99Ms"`
	MaxMs      float64 `json:"maxMs"`
	// Every watcher got every change exactly once, and nothing else.
	ExactlyOnce bool  `json:"exactlyOnce"`
	Bookmarks   int64 `json:"bookmarks"`
}

// streamWatcher is one watch: the arrival of each change's event, written by its reader only.
type streamWatcher struct {
	id      int
	conn    int
	arrived []time.Time // zero: not arrived
	version []string    // the event's resourceVersion
	count   []int32     // events of each change (1 exactly)
}

type watchRun struct {
	watchers  []*streamWatcher
	changes   int
	reached   []atomic.Int64  // per change, watchers that have it
	complete  []chan struct{} // per change, closed when every watcher has it
	bookmarks atomic.Int64
	failed    chan error // the first watcher failure
	failOnce  sync.Once
}

func (r *watchRun) fail(err error) {
	r.failOnce.Do(func() { r.failed <- err })
}

func runWatchers(args []string) error {
	fs := flag.NewFlagSet("watchers", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (credentials for an https target, and the patches)")
	target := fs.String("target", "", "server root: https://... (the apiserver, h2 over TLS) or http://... (h2c, prior knowledge)")
	ns := fs.String("namespace", "", "namespace of the watched pod")
	pod := fs.String("pod", "", "name of the watched pod")
	n := fs.Int("watchers", 10000, "watches of the pod held open")
	changes := fs.Int("changes", 20, "label patches, one at a time")
	gap := fs.Duration("gap", 100*time.Millisecond, "pause between one change reaching every watcher and the next patch")
	settle := fs.Duration("settle", 2*time.Second, "pause between the last watch opened and the first patch")
	opening := fs.Int("opening", 64, "watches being opened at once")
	openTimeout := fs.Duration("open-timeout", 10*time.Minute, "longest time to open every watch")
	changeTimeout := fs.Duration("change-timeout", 60*time.Second, "longest time one change may take to reach every watcher")
	grace := fs.Duration("grace", time.Second, "wait after the last change for events that should not come (a duplicate)")
	out := fs.String("out", "", "write the figures here as JSON")
	fs.Parse(args)
	if *target == "" || *ns == "" || *pod == "" || *n < 1 || *changes < 1 {
		return fmt.Errorf("need --target, --namespace, --pod, --watchers >= 1 and --changes >= 1")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	dial, header, protocol, err := dialerFor(*target, cfg)
	if err != nil {
		return err
	}
	// Asks for gzip as client-go's transport does; neither server compresses a watch stream
	// (k8sailor: apis::kubeapi::is_streamed). Strict: a stream past the server's bound would
	// wait rather than fail, though none is asked for.
	h2 := &http2.Transport{AllowHTTP: true, StrictMaxConcurrentStreams: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	first, err := h2conn(h2, dial)
	if err != nil {
		return err
	}
	conns := []*http2.ClientConn{first}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	streams, err := advertisedStreams(first)
	if err != nil {
		return fmt.Errorf("%s: %w", *target, err)
	}
	selector := url.QueryEscape("metadata.name=" + *pod)
	listVersion, err := listOne(ctx, first, *target, header, *ns, *pod, selector)
	if err != nil {
		return err
	}
	for len(conns)*int(streams) < *n {
		c, err := h2conn(h2, dial)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		if s, err := advertisedStreams(c); err != nil || s != streams {
			return fmt.Errorf("%s: connection %d advertises %d streams, the first %d (%v)", *target, len(conns), s, streams, err)
		}
	}
	fmt.Fprintf(os.Stderr, "loader: %s (%s): %d streams per connection, %d connections for %d watches from resourceVersion %s\n",
		*target, protocol, streams, len(conns), *n, listVersion)

	cs, err := client(*kubeconfig, 100, 100)
	if err != nil {
		return err
	}
	run := &watchRun{changes: *changes, reached: make([]atomic.Int64, *changes), failed: make(chan error, 1)}
	for k := 0; k < *changes; k++ {
		run.complete = append(run.complete, make(chan struct{}))
	}
	for i := 0; i < *n; i++ {
		run.watchers = append(run.watchers, &streamWatcher{id: i, conn: i / int(streams),
			arrived: make([]time.Time, *changes), version: make([]string, *changes), count: make([]int32, *changes)})
	}
	watchPath := fmt.Sprintf("%s/api/v1/namespaces/%s/pods?allowWatchBookmarks=true&fieldSelector=%s&resourceVersion=%s&watch=true",
		*target, *ns, selector, listVersion)
	var readers sync.WaitGroup
	opened := make(chan error, *n)
	slots := make(chan struct{}, *opening)
	t0 := time.Now()
	for _, w := range run.watchers {
		readers.Add(1)
		go func() {
			defer readers.Done()
			slots <- struct{}{}
			body, err := openWatch(ctx, conns[w.conn], watchPath, header)
			<-slots
			opened <- err
			if err != nil {
				return
			}
			defer body.Close()
			w.read(ctx, body, run)
		}()
	}
	openDeadline := time.After(*openTimeout)
	for i := 0; i < *n; i++ {
		select {
		case err := <-opened:
			if err != nil {
				return fmt.Errorf("%s: opening watch %d of %d: %w", *target, i+1, *n, err)
			}
		case err := <-run.failed:
			return fmt.Errorf("%s: while opening the watches: %w", *target, err)
		case <-openDeadline:
			return fmt.Errorf("%s: %d of %d watches open after %s", *target, i, *n, *openTimeout)
		}
	}
	res := watchersResult{Target: *target, Protocol: protocol, Watchers: *n, Connections: len(conns),
		StreamsPerConnection: streams, ListResourceVersion: listVersion, OpenS: time.Since(t0).Seconds(), Changes: *changes}
	fmt.Fprintf(os.Stderr, "loader: %d watches open in %.1f s\n", *n, res.OpenS)
	time.Sleep(*settle)

	sent := make([]time.Time, *changes)
	versions := make([]string, *changes)
	stamp := time.Now().UnixNano() % 1_000_000
	for k := 0; k < *changes; k++ {
		// The annotation makes the first patch a change even on a pod an earlier run labelled.
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"c%d"},"annotations":{"bench-watchers-run":"%d"}}}`, watchLabel, k, stamp))
		sent[k] = time.Now()
		got, err := cs.CoreV1().Pods(*ns).Patch(ctx, *pod, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("patch %d of %s/%s: %w", k, *ns, *pod, err)
		}
		res.PatchMs = append(res.PatchMs, ms(time.Since(sent[k])))
		versions[k] = got.ResourceVersion
		select {
		case <-run.complete[k]:
		case err := <-run.failed:
			return fmt.Errorf("%s: change %d: %w", *target, k, err)
		case <-time.After(*changeTimeout):
			return fmt.Errorf("%s: change %d (resourceVersion %s) reached %d of %d watchers in %s; first without it: %s",
				*target, k, versions[k], run.reached[k].Load(), *n, *changeTimeout, run.without(k))
		}
		var last time.Time
		for _, w := range run.watchers {
			if w.arrivedAt(k).After(last) {
				last = w.arrivedAt(k)
			}
		}
		res.AllMs = append(res.AllMs, ms(last.Sub(sent[k])))
		time.Sleep(*gap)
	}
	select {
	case err := <-run.failed:
		return fmt.Errorf("%s: after the last change: %w", *target, err)
	case <-time.After(*grace):
	}
	cancel()
	stopped := make(chan struct{})
	go func() {
		readers.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: the watchers' streams did not end within 30 s of being cancelled", *target)
	}

	var lat []float64
	var wrong []string
	for _, w := range run.watchers {
		for k := 0; k < *changes; k++ {
			switch {
			case w.count[k] != 1:
				wrong = append(wrong, fmt.Sprintf("watcher %d got change %d %d times", w.id, k, w.count[k]))
			case w.version[k] != versions[k]:
				wrong = append(wrong, fmt.Sprintf("watcher %d got change %d at resourceVersion %s, its patch made %s", w.id, k, w.version[k], versions[k]))
			default:
				lat = append(lat, ms(w.arrived[k].Sub(sent[k])))
			}
		}
	}
	res.ExactlyOnce = len(wrong) == 0
	res.Bookmarks = run.bookmarks.Load()
	slices.Sort(lat)
	res.Deliveries = len(lat)
	res.P50Ms, res.P90Ms, res.P99Ms = pct(lat, 50), pct(lat, 90), pct(lat, 99)
	if len(lat) > 0 {
		res.MaxMs = lat[len(lat)-1]
	}
	fmt.Fprintf(os.Stderr, "loader: %s: %d deliveries, p50 %.2f ms, p99 %.2f ms, max %.2f ms; exactly once: %v\n",
		*target, res.Deliveries, res.P50Ms, res.P99Ms, res.MaxMs, res.ExactlyOnce)
	if *out != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if !res.ExactlyOnce {
		return fmt.Errorf("%s: not every change reached every watcher exactly once (%d wrong): %v", *target, len(wrong), wrong[:min(5, len(wrong))])
	}
	return nil
}

// dialerFor: how to reach the target, the headers each request carries, and the protocol's name.
func dialerFor(target string, cfg *rest.Config) (func() (net.Conn, error), http.Header, string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, nil, "", err
	}
	header := http.Header{"Accept": {"application/json"}, "User-Agent": {"k8sailor-bench-loader"}}
	d := &net.Dialer{Timeout: 10 * time.Second}
	switch u.Scheme {
	case "http":
		return func() (net.Conn, error) { return d.Dial("tcp", u.Host) }, header, "h2c (prior knowledge)", nil
	case "https":
		tlsConfig, err := rest.TLSConfigFor(cfg)
		if err != nil {
			return nil, nil, "", err
		}
		if tlsConfig == nil {
			tlsConfig = &tls.Config{}
		}
		tlsConfig = tlsConfig.Clone()
		tlsConfig.NextProtos = []string{"h2"}
		token := cfg.BearerToken
		if token == "" && cfg.BearerTokenFile != "" {
			b, err := os.ReadFile(cfg.BearerTokenFile)
			if err != nil {
				return nil, nil, "", err
			}
			token = string(bytes.TrimSpace(b))
		}
		if token != "" {
			header.Set("Authorization", "Bearer "+token)
		}
		return func() (net.Conn, error) {
			c, err := tls.DialWithDialer(d, "tcp", u.Host, tlsConfig)
			if err != nil {
				return nil, err
			}
			if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
				c.Close()
				return nil, fmt.Errorf("%s negotiated %q by ALPN, not h2", target, p)
			}
			return c, nil
		}, header, "h2 (TLS, ALPN)", nil
	default:
		return nil, nil, "", fmt.Errorf("target %q: want http:// or https://", target)
	}
}

func h2conn(t *http2.Transport, dial func() (net.Conn, error)) (*http2.ClientConn, error) {
	c, err := dial()
	if err != nil {
		return nil, err
	}
	cc, err := t.NewClientConn(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return cc, nil
}

// advertisedStreams waits for the server's SETTINGS and returns its SETTINGS_MAX_CONCURRENT_STREAMS
// (Go's client takes 1,000 when a server sends none).
func advertisedStreams(cc *http2.ClientConn) (uint32, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := cc.State()
		if st.MaxConcurrentStreams > 0 {
			return st.MaxConcurrentStreams, nil
		}
		if st.Closed {
			return 0, errors.New("HTTP/2 connection closed before the server's SETTINGS")
		}
		if time.Now().After(deadline) {
			return 0, errors.New("no SETTINGS from the server within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// listOne lists the pod by its name, as kubectl does before watching it: the list's resourceVersion.
func listOne(ctx context.Context, cc *http2.ClientConn, target string, header http.Header, ns, pod, selector string) (string, error) {
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods?fieldSelector=%s", target, ns, selector)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header = header.Clone()
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := cc.RoundTrip(req.WithContext(lctx))
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, body)
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("GET %s: %w: %.300s", u, err, body)
	}
	if len(list.Items) != 1 || list.Metadata.ResourceVersion == "" {
		return "", fmt.Errorf("GET %s: %d items, resourceVersion %q: want pod %s alone", u, len(list.Items), list.Metadata.ResourceVersion, pod)
	}
	return list.Metadata.ResourceVersion, nil
}

func openWatch(ctx context.Context, cc *http2.ClientConn, u string, header http.Header) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header = header.Clone()
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return resp.Body, nil
}

func (w *streamWatcher) arrivedAt(k int) time.Time { return w.arrived[k] }

// without names the first watchers that lack change k (read racily: for a failure message).
func (r *watchRun) without(k int) string {
	var out []string
	for _, w := range r.watchers {
		if w.arrivedAt(k).IsZero() {
			out = append(out, fmt.Sprintf("watcher %d on connection %d", w.id, w.conn))
			if len(out) == 3 {
				break
			}
		}
	}
	return fmt.Sprint(out)
}

// read takes the stream's events until the run ends, timing each change as its line completes.
func (w *streamWatcher) read(ctx context.Context, body io.Reader, run *watchRun) {
	lines := bufio.NewReaderSize(body, 16<<10)
	var long []byte
	for {
		line, err := lines.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				run.fail(fmt.Errorf("watcher %d (connection %d): the stream ended: %v", w.id, w.conn, err))
			}
			return
		}
		now := time.Now()
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		kind, version, change, err := eventOf(line)
		if err != nil {
			run.fail(fmt.Errorf("watcher %d: %w: %.300s", w.id, err, line))
			return
		}
		switch {
		case kind == "BOOKMARK":
			run.bookmarks.Add(1)
		case kind == "MODIFIED" && change >= 0 && change < run.changes:
			w.count[change]++
			if w.count[change] > 1 {
				run.fail(fmt.Errorf("watcher %d: change %d a second time (resourceVersion %s)", w.id, change, version))
				return
			}
			w.arrived[change], w.version[change] = now, version
			if run.reached[change].Add(1) == int64(len(run.watchers)) {
				close(run.complete[change])
			}
		default:
			run.fail(fmt.Errorf("watcher %d: an event no change made: %.300s", w.id, line))
			return
		}
	}
}

var (
	typeMember    = []byte(`{"type":"`)
	versionMember = []byte(`"resourceVersion":"`)
	changeMember  = []byte(`"` + watchLabel + `":"c`)
)

// eventOf reads an event line's type, its object's resourceVersion and the change its label
// names (-1: none) without decoding the whole object: a change's event starts with its type
// (both servers write `{"type":"MODIFIED","object":{...`), and the first resourceVersion
// member is the object's metadata's (no other member of a Pod bears that name, and one inside
// a string would be escaped). Anything else is decoded in full.
func eventOf(line []byte) (string, string, int, error) {
	if rest, ok := bytes.CutPrefix(line, typeMember); ok {
		kind, rest, ok := bytes.Cut(rest, []byte(`"`))
		if ok && string(kind) != "BOOKMARK" && string(kind) != "ERROR" {
			_, v, ok := bytes.Cut(rest, versionMember)
			if !ok {
				return "", "", 0, errors.New("an event without a resourceVersion")
			}
			version, _, _ := bytes.Cut(v, []byte(`"`))
			change := -1
			if _, c, ok := bytes.Cut(rest, changeMember); ok {
				digits, _, _ := bytes.Cut(c, []byte(`"`))
				if k, err := strconv.Atoi(string(digits)); err == nil {
					change = k
				}
			}
			return string(kind), string(version), change, nil
		}
	}
	var event struct {
		Type   string `json:"type"`
		Object struct {
			Message  string `json:"message"`
			Metadata struct {
				ResourceVersion string            `json:"resourceVersion"`
				Labels          map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(line, &event); err != nil {
		return "", "", 0, fmt.Errorf("not a watch event: %w", err)
	}
	if event.Type == "ERROR" {
		return "", "", 0, fmt.Errorf("ERROR event: %s", event.Object.Message)
	}
	change := -1
	if v, ok := event.Object.Metadata.Labels[watchLabel]; ok && len(v) > 1 && v[0] == 'c' {
		if k, err := strconv.Atoi(v[1:]); err == nil {
			change = k
		}
	}
	return event.Type, event.Object.Metadata.ResourceVersion, change, nil
}
