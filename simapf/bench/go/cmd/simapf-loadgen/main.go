// simapf-loadgen: one scenario client of simapf's bench, driven through client-go.
//
// `simapf measure` starts one of these per scenario client (a process each, as separate
// programs would be, so that client-go's process-wide feature gates, WatchListClient among
// them, can differ between clients) and one to create the inventory. It reads a plan (JSON,
// written by simapf.bench.plan) and writes one CSV row per HTTP attempt it makes, so that
// simapf can count 429s, retries and latencies as a run does.
//
//	simapf-loadgen -plan client.json -out attempts.csv      # drive a client until the plan's end
//	simapf-loadgen -plan inventory.json -create             # create the inventory, then exit
//	simapf-loadgen -keygen DIR                              # a service-account key pair for the apiserver
//
// Requests go through client-go's REST client with its own retry of a 429 (Retry-After), its
// User-Agent (never curl's: the apiserver pretty-prints JSON for curl, which turns the streaming
// encoder off) and its token bucket when the plan has one. Informers are client-go's shared
// informers, as controllers build them.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	mathrand "math/rand"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

type options struct {
	ResourceVersion      *string `json:"resourceVersion"`
	ResourceVersionMatch string  `json:"resourceVersionMatch"`
	Limit                int64   `json:"limit"`
	Paginate             bool    `json:"paginate"`
	LabelSelector        string  `json:"labelSelector"`
	FieldSelector        string  `json:"fieldSelector"`
	SendInitialEvents    *bool   `json:"sendInitialEvents"`
	Pretty               bool    `json:"pretty"`
}

type requestPlan struct {
	Verb            string   `json:"verb"`
	Resource        string   `json:"resource"` // configmaps or secrets (core/v1)
	Namespaces      []string `json:"namespaces"`
	Names           int      `json:"names"` // objects per namespace, named <resource>-<k>
	Options         options  `json:"options"`
	Protobuf        bool     `json:"protobuf"`
	WatchDurationS  float64  `json:"watch_duration_s"`
	ObjectBytes     int      `json:"object_bytes"`
	MixCreate       float64  `json:"mix_create"`
	MixUpdate       float64  `json:"mix_update"`
	MixDelete       float64  `json:"mix_delete"`
	InformerResyncS float64  `json:"informer_resync_s"`
}

type instance struct {
	Token  string  `json:"token"`
	StartS float64 `json:"start_s"`
}

type plan struct {
	Server       string      `json:"server"`
	CAFile       string      `json:"ca_file"`
	Client       string      `json:"client"`
	Kind         string      `json:"kind"` // open_loop, closed_loop, informer, mutator, inventory
	Instances    []instance  `json:"instances"`
	ZeroUnixNs   int64       `json:"zero_unix_ns"` // time 0 of the run, shared with the sampler
	DurationS    float64     `json:"duration_s"`
	RatePerS     float64     `json:"rate_per_s"`
	Poisson      bool        `json:"poisson"`
	MaxInFlight  int         `json:"max_in_flight"`
	ThinkMeanS   float64     `json:"think_mean_s"`
	ThinkDist    string      `json:"think_distribution"`
	Iterations   int         `json:"iterations"`
	MaxRetries   int         `json:"max_retries"`
	QPS          float32     `json:"qps"`
	Burst        int         `json:"burst"`
	AcceptGzip   bool        `json:"accept_gzip"`
	Seed         int64       `json:"seed"`
	Request      requestPlan `json:"request"`
	Inventory    []inventory `json:"inventory"`
	CreateWorker int         `json:"create_workers"`
}

type inventory struct {
	Resource    string   `json:"resource"`
	Namespaces  []string `json:"namespaces"`
	PerNS       int      `json:"per_namespace"`
	ObjectBytes int      `json:"object_bytes"`
}

// attempt is one HTTP exchange, as the transport saw it.
type attempt struct {
	instance      int
	verb          string
	startS, endS  float64 // headers received: endS; a logical request's end is its last body byte
	code          int
	priorityLevel string
	flowSchema    string
	bytes         int64
	logical       int64 // which logical request of the process it belongs to
	final         bool  // a success whose body the client read to its end
	errText       string
}

type recorder struct {
	mu   sync.Mutex
	w    *csv.Writer
	zero time.Time
}

func (r *recorder) since(t time.Time) float64 { return t.Sub(r.zero).Seconds() }

func (r *recorder) write(a attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.w.Write([]string{
		strconv.Itoa(a.instance), a.verb, strconv.FormatInt(a.logical, 10),
		strconv.FormatFloat(a.startS, 'f', 6, 64), strconv.FormatFloat(a.endS, 'f', 6, 64),
		strconv.Itoa(a.code), a.priorityLevel, a.flowSchema, strconv.FormatInt(a.bytes, 10),
		strconv.FormatBool(a.final), a.errText,
	})
}

// logicalKey carries a logical request's number to the transport through the request context.
type logicalKey struct{}

// tracingTransport records every attempt: client-go retries a 429 inside one Stream call.
type tracingTransport struct {
	next     http.RoundTripper
	rec      *recorder
	instance int
}

func (t *tracingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	logical, _ := req.Context().Value(logicalKey{}).(int64)
	a := attempt{instance: t.instance, verb: verbOf(req), startS: t.rec.since(start), endS: t.rec.since(time.Now()), logical: logical}
	if logical == 0 { // an informer's own request: each attempt a logical request of its own
		a.logical = logicalRequests.Add(1)
	}
	if err != nil {
		a.errText = oneLine(err.Error())
		t.rec.write(a)
		return resp, err
	}
	a.code = resp.StatusCode
	a.priorityLevel = resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
	a.flowSchema = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 300 {
		t.rec.write(a)
		return resp, nil
	}
	// A success: the attempt ends when the client has read the body.
	resp.Body = &countingBody{ReadCloser: resp.Body, done: func(n int64, readErr error) {
		a.endS = t.rec.since(time.Now())
		a.bytes = n
		a.final = true
		if readErr != nil && readErr != io.EOF {
			a.errText = oneLine(readErr.Error())
		}
		t.rec.write(a)
	}}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n    int64
	once sync.Once
	done func(int64, error)
	err  error
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil {
		b.err = err
	}
	return n, err
}

func (b *countingBody) Close() error {
	b.once.Do(func() { b.done(b.n, b.err) })
	return b.ReadCloser.Close()
}

func oneLine(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), ",", ";") }

func verbOf(req *http.Request) string {
	q := req.URL.Query()
	switch req.Method {
	case http.MethodGet:
		if q.Get("watch") == "true" || q.Get("watch") == "1" {
			return "watch"
		}
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		// /api/v1/namespaces/NS/RESOURCE or /api/v1/RESOURCE: a list; one more segment: a get.
		if len(parts) == 5 || len(parts) == 3 {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(req.Method)
}

func config(p *plan, token string, rec *recorder, index int) *rest.Config {
	cfg := &rest.Config{
		Host:            p.Server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: p.CAFile},
		// client-go asks for gzip unless compression is disabled; the scenario says which.
		DisableCompression: !p.AcceptGzip,
		Timeout:            0,
	}
	if p.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(p.QPS, p.Burst)
	} else {
		cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	}
	if p.Request.Protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	if rec != nil {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return &tracingTransport{next: rt, rec: rec, instance: index}
		}
	}
	// An instance of its own: its own connection, as a separate program would have. client-go
	// shares one transport (one HTTP/2 connection) between configs of the same TLS settings;
	// a Proxy function makes a config's transport its own (no proxy is set in the environment
	// the bench gives the load generator, so this one connects directly).
	cfg.Proxy = http.ProxyFromEnvironment
	cfg.UserAgent = fmt.Sprintf("simapf-loadgen/%s-%d (linux) client-go", p.Client, index)
	return cfg
}

func listOptions(o options) metav1.ListOptions {
	opts := metav1.ListOptions{
		ResourceVersionMatch: metav1.ResourceVersionMatch(o.ResourceVersionMatch),
		Limit:                o.Limit,
		LabelSelector:        o.LabelSelector,
		FieldSelector:        o.FieldSelector,
		SendInitialEvents:    o.SendInitialEvents,
	}
	if o.ResourceVersion != nil {
		opts.ResourceVersion = *o.ResourceVersion
	}
	return opts
}

type client struct {
	plan  *plan
	cs    *kubernetes.Clientset
	rest  rest.Interface
	index int
	rng   *mathrand.Rand
}

// logicalRequests numbers the logical requests of this process, for the attempts' rows.
var logicalRequests atomic.Int64

func (c *client) namespace() string {
	ns := c.plan.Request.Namespaces
	if len(ns) == 0 {
		return ""
	}
	return ns[c.rng.Intn(len(ns))]
}

// one sends one logical request (client-go retrying its 429s) and reads its whole response.
func (c *client) one(ctx context.Context) {
	r := c.plan.Request
	ctx = context.WithValue(ctx, logicalKey{}, logicalRequests.Add(1))
	ns := c.namespace()
	var req *rest.Request
	switch r.Verb {
	case "list", "watch":
		opts := listOptions(r.Options)
		opts.Watch = r.Verb == "watch"
		if opts.Watch && r.WatchDurationS > 0 {
			seconds := int64(r.WatchDurationS)
			opts.TimeoutSeconds = &seconds
		}
		req = c.rest.Get().Namespace(ns).Resource(r.Resource).VersionedParams(&opts, scheme.ParameterCodec)
	case "get":
		name := fmt.Sprintf("%s-%d", strings.TrimSuffix(r.Resource, "s"), c.rng.Intn(max(1, r.Names)))
		req = c.rest.Get().Namespace(ns).Resource(r.Resource).Name(name)
	default:
		c.write(ctx, ns)
		return
	}
	if r.Options.Pretty {
		req = req.Param("pretty", "true")
	}
	req = req.MaxRetries(c.plan.MaxRetries)
	if r.Verb == "list" && r.Options.Limit > 0 && r.Options.Paginate {
		c.pages(ctx, ns, r)
		return
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return // recorded by the transport
	}
	_, _ = io.Copy(io.Discard, body)
	body.Close()
}

// pages follows continue tokens, as client-go's pager does: each page a typed LIST.
func (c *client) pages(ctx context.Context, ns string, r requestPlan) {
	opts := listOptions(r.Options)
	for {
		var next string
		if r.Resource == "secrets" {
			list, err := c.cs.CoreV1().Secrets(ns).List(ctx, opts)
			if err != nil {
				return
			}
			next = list.Continue
		} else {
			list, err := c.cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
			if err != nil {
				return
			}
			next = list.Continue
		}
		if next == "" {
			return
		}
		opts.Continue = next
		opts.ResourceVersion = ""
		opts.ResourceVersionMatch = ""
	}
}

func (c *client) write(ctx context.Context, ns string) {
	r := c.plan.Request
	total := r.MixCreate + r.MixUpdate + r.MixDelete
	u := c.rng.Float64() * total
	name := fmt.Sprintf("%s-%d", strings.TrimSuffix(r.Resource, "s"), c.rng.Intn(max(1, r.Names)))
	ctx = context.WithValue(ctx, logicalKey{}, logicalRequests.Add(1))
	switch {
	case u < r.MixCreate:
		obj := object(r.Resource, fmt.Sprintf("%s-w%d-%d", strings.TrimSuffix(r.Resource, "s"), c.index, c.rng.Int63()), ns, r.ObjectBytes)
		c.rest.Post().Namespace(ns).Resource(r.Resource).Body(obj).MaxRetries(c.plan.MaxRetries).Do(ctx)
	case u < r.MixCreate+r.MixUpdate:
		obj := object(r.Resource, name, ns, r.ObjectBytes)
		c.rest.Put().Namespace(ns).Resource(r.Resource).Name(name).Body(obj).MaxRetries(c.plan.MaxRetries).Do(ctx)
	default:
		c.rest.Delete().Namespace(ns).Resource(r.Resource).Name(name).MaxRetries(c.plan.MaxRetries).Do(ctx)
	}
}

// object is a ConfigMap or Secret of about `size` bytes of data.
func object(resource, name, ns string, size int) interface{ GetName() string } {
	payload := strings.Repeat("x", max(0, size))
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"simapf": "bench"}}
	if resource == "secrets" {
		return &corev1.Secret{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}, ObjectMeta: meta,
			StringData: map[string]string{"data": payload}}
	}
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}, ObjectMeta: meta,
		Data: map[string]string{"data": payload}}
}

func (c *client) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (c *client) think() time.Duration {
	m := c.plan.ThinkMeanS
	switch c.plan.ThinkDist {
	case "constant":
		return seconds(m)
	case "uniform":
		return seconds(2 * m * c.rng.Float64())
	}
	return seconds(c.rng.ExpFloat64() * m)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func run(ctx context.Context, p *plan, rec *recorder) error {
	end := rec.zero.Add(seconds(p.DurationS))
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var slots chan struct{}
	if p.MaxInFlight > 0 {
		slots = make(chan struct{}, p.MaxInFlight)
	}
	var iterations sync.Mutex
	left := p.Iterations
	var wg sync.WaitGroup
	for i, inst := range p.Instances {
		cs, err := kubernetes.NewForConfig(config(p, inst.Token, rec, i))
		if err != nil {
			return err
		}
		c := &client{plan: p, cs: cs, rest: cs.CoreV1().RESTClient(), index: i, rng: mathrand.New(mathrand.NewSource(p.Seed*1_000_003 + int64(i)))}
		wg.Add(1)
		go func(c *client, cs *kubernetes.Clientset, inst instance) {
			defer wg.Done()
			if !c.wait(ctx, time.Until(rec.zero.Add(seconds(inst.StartS)))) {
				return
			}
			switch p.Kind {
			case "informer":
				c.inform(ctx, cs)
			case "closed_loop":
				for ctx.Err() == nil {
					if p.Iterations > 0 {
						iterations.Lock()
						if left == 0 {
							iterations.Unlock()
							return
						}
						left--
						iterations.Unlock()
					}
					c.one(ctx)
					if !c.wait(ctx, c.think()) {
						return
					}
				}
			default: // open_loop and mutator: arrivals at a rate, each request on its own
				var inflight sync.WaitGroup
				next := time.Now()
				for {
					gap := 1 / p.RatePerS
					if p.Poisson {
						gap = c.rng.ExpFloat64() / p.RatePerS
					}
					next = next.Add(seconds(gap))
					if !c.wait(ctx, time.Until(next)) {
						break
					}
					if slots != nil {
						select {
						case slots <- struct{}{}:
						case <-ctx.Done():
						}
						if ctx.Err() != nil {
							break
						}
					}
					inflight.Add(1)
					// Each request its own random stream, drawn from the instance's (a Rand is not safe
					// to share between goroutines).
					sub := &client{plan: p, cs: c.cs, rest: c.rest, index: c.index, rng: mathrand.New(mathrand.NewSource(c.rng.Int63()))}
					go func() {
						defer inflight.Done()
						sub.one(ctx)
						if slots != nil {
							<-slots
						}
					}()
				}
				inflight.Wait()
			}
		}(c, cs, inst)
	}
	wg.Wait()
	return nil
}

// inform runs a client-go shared informer on the plan's resource until the run ends.
func (c *client) inform(ctx context.Context, cs *kubernetes.Clientset) {
	r := c.plan.Request
	opts := []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		if r.Options.LabelSelector != "" {
			o.LabelSelector = r.Options.LabelSelector
		}
		if r.Options.FieldSelector != "" {
			o.FieldSelector = r.Options.FieldSelector
		}
	})}
	if len(r.Namespaces) == 1 {
		opts = append(opts, informers.WithNamespace(r.Namespaces[0]))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, seconds(r.InformerResyncS), opts...)
	var informer cache.SharedIndexInformer
	if r.Resource == "secrets" {
		informer = factory.Core().V1().Secrets().Informer()
	} else {
		informer = factory.Core().V1().ConfigMaps().Informer()
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	_ = informer
}

// keygen writes sa.key and sa.pub: the RSA pair the apiserver signs and checks service-account
// tokens with (it needs one to start; the bench's clients use static tokens).
func keygen(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	private := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	public := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if err := os.WriteFile(dir+"/sa.key", private, 0o600); err != nil {
		return err
	}
	return os.WriteFile(dir+"/sa.pub", public, 0o644)
}

// storedOverhead is how many bytes an object of the resource takes in etcd beyond its data
// value: its metadata, as the apiserver writes it (protobuf; managed fields included). It is
// read off one probe object, fetched back as protobuf, the encoding the apiserver stores.
func storedOverhead(ctx context.Context, rc rest.Interface, resource, ns string) (int, error) {
	name := "simapf-probe"
	if err := rc.Post().Namespace(ns).Resource(resource).Body(object(resource, name, ns, 0)).Do(ctx).Error(); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, fmt.Errorf("creating a probe %s in %q: %w", resource, ns, err)
	}
	raw, err := rc.Get().Namespace(ns).Resource(resource).Name(name).SetHeader("Accept", "application/vnd.kubernetes.protobuf").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the probe %s back: %w", resource, err)
	}
	if err := rc.Delete().Namespace(ns).Resource(resource).Name(name).Do(ctx).Error(); err != nil {
		return 0, fmt.Errorf("deleting the probe %s: %w", resource, err)
	}
	return len(raw), nil
}

func create(ctx context.Context, p *plan) error {
	cs, err := kubernetes.NewForConfig(config(p, p.Instances[0].Token, nil, 0))
	if err != nil {
		return err
	}
	rc := cs.CoreV1().RESTClient()
	type job struct {
		resource, name, ns string
		size               int
	}
	jobs := make(chan job)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < max(1, p.CreateWorker); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				err := rc.Post().Namespace(j.ns).Resource(j.resource).Body(object(j.resource, j.name, j.ns, j.size)).Do(ctx).Error()
				if err != nil && !apierrors.IsAlreadyExists(err) {
					select {
					case errs <- fmt.Errorf("creating %s %s/%s: %w", j.resource, j.ns, j.name, err):
					default:
					}
				}
			}
		}()
	}
	seen := map[string]bool{}
	for _, inv := range p.Inventory {
		for _, ns := range inv.Namespaces {
			if ns != "" && !seen[ns] {
				seen[ns] = true
				n := &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}
				if err := rc.Post().Resource("namespaces").Body(n).Do(ctx).Error(); err != nil && !apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("creating namespace %s: %w", ns, err)
				}
			}
		}
	}
	payload := make([]int, len(p.Inventory))
	for i, inv := range p.Inventory {
		overhead, err := storedOverhead(ctx, rc, inv.Resource, inv.Namespaces[0])
		if err != nil {
			close(jobs)
			wg.Wait()
			return err
		}
		payload[i] = max(0, inv.ObjectBytes-overhead)
		fmt.Printf("%s: %d bytes of metadata as stored; data values of %d bytes\n", inv.Resource, overhead, payload[i])
	}
	go func() {
		defer close(jobs)
		for i, inv := range p.Inventory {
			for _, ns := range inv.Namespaces {
				for k := 0; k < inv.PerNS; k++ {
					select {
					case jobs <- job{inv.Resource, fmt.Sprintf("%s-%d", strings.TrimSuffix(inv.Resource, "s"), k), ns, payload[i]}:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

func main() {
	planPath := flag.String("plan", "", "the plan (JSON) simapf wrote")
	outPath := flag.String("out", "", "where to write one CSV row per HTTP attempt")
	createOnly := flag.Bool("create", false, "create the plan's inventory and exit")
	keyDir := flag.String("keygen", "", "write a service-account key pair (sa.key, sa.pub) into this folder and exit")
	flag.Parse()
	if *keyDir != "" {
		if err := keygen(*keyDir); err != nil {
			fmt.Fprintln(os.Stderr, "simapf-loadgen:", err)
			os.Exit(1)
		}
		return
	}
	text, err := os.ReadFile(*planPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "simapf-loadgen:", err)
		os.Exit(2)
	}
	var p plan
	if err := json.Unmarshal(text, &p); err != nil {
		fmt.Fprintln(os.Stderr, "simapf-loadgen: reading the plan:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *createOnly {
		if err := create(ctx, &p); err != nil {
			fmt.Fprintln(os.Stderr, "simapf-loadgen:", err)
			os.Exit(1)
		}
		return
	}
	out, err := os.Create(*outPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "simapf-loadgen:", err)
		os.Exit(2)
	}
	buf := bufio.NewWriterSize(out, 1<<20)
	w := csv.NewWriter(buf)
	_ = w.Write([]string{"instance", "verb", "logical", "start_s", "end_s", "code", "priority_level_uid", "flow_schema_uid", "bytes", "final", "error"})
	rec := &recorder{w: w, zero: time.Unix(0, p.ZeroUnixNs)}
	err = run(ctx, &p, rec)
	rec.mu.Lock()
	w.Flush()
	buf.Flush()
	rec.mu.Unlock()
	out.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "simapf-loadgen:", err)
		os.Exit(1)
	}
}
