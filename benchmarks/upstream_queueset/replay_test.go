// The simapf replay format run through kube-apiserver's own queueset.
//
// benchmarks/replay_upstream.py copies k8s.io/apiserver's queueset package beside this
// file and builds them together as one test binary, so that the harness can use the
// package's own test clock and counting promises (unexported) the way its tests do.
// The binary reads the same LEVEL.json and TRACE.csv as `simapf replay` and writes the
// same OUT.csv, so the two can be compared request by request and timed whole-process.
//
// The queueset, its promises and its goroutine counter are upstream's; the clock is the
// harness's own (serialClock below). The package's fake clock starts every event due at an
// instant in a goroutine of its own at once, so events that tie race for the queueset's lock
// and the Go scheduler decides their order: on a trace with ties, runs of one binary on one
// trace give different outputs. serialClock runs them one at a time instead, each until every
// goroutine it woke is blocked again, in the order simapf's clock gives them (time, phase,
// then the arrival order of the request each belongs to): one of the orders the fake clock
// can produce, and the same one every time.
//
//	SIMAPF_LEVEL=level.json SIMAPF_TRACE=trace.csv SIMAPF_OUT=out.csv \
//	    ./queueset.test -test.run '^TestSimapfReplay$'
package queueset

import (
	"bufio"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	"k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/eventclock"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	baseclocktest "k8s.io/utils/clock/testing"
)

// The phases of events due at one instant, in the order they run: simapf's Phase
// (simapf/engine/clock.py).
const (
	phaseRelease = iota // a request's additional latency is over (the queueset's own event)
	phaseFinish         // a handler returned
	phaseTimeout        // a queued request's wait limit
	phaseArrival        // a request arrives
)

type serialEvent struct {
	when  time.Time
	phase int
	order int // the arrival rank of the request the event belongs to (time, then file order)
	f     eventclock.EventFunc
}

type serialEvents []serialEvent

func (h serialEvents) Len() int { return len(h) }
func (h serialEvents) Less(i, j int) bool {
	a, b := h[i], h[j]
	if !a.when.Equal(b.when) {
		return a.when.Before(b.when)
	}
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	return a.order < b.order
}
func (h serialEvents) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *serialEvents) Push(x interface{}) { *h = append(*h, x.(serialEvent)) }
func (h *serialEvents) Pop() interface{} {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// goroutines counts the active goroutines, as upstream's counter.GoRoutineCounter asks.
type goroutines struct{ wg sync.WaitGroup }

func (g *goroutines) Add(delta int) { g.wg.Add(delta) }

// serialClock is an eventclock.Interface that runs one event at a time, in (time, phase,
// order) order, and waits for every goroutine it woke to block before the next. An event
// the queueset schedules itself (the end of a request's additional latency) belongs to the
// request whose finish is being handled when it is scheduled.
type serialClock struct {
	baseclocktest.FakePassiveClock
	lock    sync.Mutex
	events  serialEvents
	active  *goroutines
	current int // the order of the event being run
}

var _ eventclock.Interface = &serialClock{}

func newSerialClock(start time.Time) *serialClock {
	return &serialClock{FakePassiveClock: *baseclocktest.NewFakePassiveClock(start), active: &goroutines{}}
}

func (c *serialClock) at(when time.Time, phase, order int, f eventclock.EventFunc) {
	c.lock.Lock()
	defer c.lock.Unlock()
	heap.Push(&c.events, serialEvent{when: when, phase: phase, order: order, f: f})
}

func (c *serialClock) EventAfterTime(f eventclock.EventFunc, t time.Time) {
	c.at(t, phaseRelease, c.current, f)
}

func (c *serialClock) EventAfterDuration(f eventclock.EventFunc, d time.Duration) {
	c.EventAfterTime(f, c.Now().Add(d))
}

// Sleep is the queueset's interface; the harness's handlers sleep with sleepAs.
func (c *serialClock) Sleep(d time.Duration) { c.sleepAs(d, phaseRelease, c.current) }

// sleepAs blocks the calling goroutine until an event of the given phase and order, d from now.
func (c *serialClock) sleepAs(d time.Duration, phase, order int) {
	woken := make(chan struct{})
	c.at(c.Now().Add(d), phase, order, func(time.Time) {
		c.active.Add(1) // the sleeper is about to wake
		close(woken)
	})
	c.active.Add(-1)
	<-woken
}

// run runs every event, one at a time, until none is left.
func (c *serialClock) run() {
	for {
		c.active.wg.Wait()
		c.lock.Lock()
		if len(c.events) == 0 {
			c.lock.Unlock()
			return
		}
		ev := heap.Pop(&c.events).(serialEvent)
		c.current = ev.order
		c.lock.Unlock()
		c.SetTime(ev.when)
		c.active.Add(1)
		go func() {
			defer c.active.Add(-1)
			ev.f(ev.when)
		}()
	}
}

type replayLevel struct {
	Name                    string  `json:"name"`
	ConcurrencyLimit        int     `json:"concurrencyLimit"`
	Queues                  int     `json:"queues"`
	HandSize                int     `json:"handSize"`
	QueueLengthLimit        int     `json:"queueLengthLimit"`
	RequestWaitLimitSeconds float64 `json:"requestWaitLimitSeconds"`
}

type replayRequest struct {
	id                string
	arrival, service  time.Duration
	fsName, flowDist  string
	initial, final    uint64
	additionalLatency time.Duration
	// what happened
	dispatched       bool
	reason           string
	queue            int
	dispatch, finish time.Duration
	waited           time.Duration // in its queue, if it timed out there
}

// flowHash is the apiserver's flow hash: SHA-256 of the FlowSchema's name, a zero byte and
// the distinguisher, its first eight bytes read little-endian.
func flowHash(fsName, distinguisher string) uint64 {
	sum := sha256.Sum256([]byte(fsName + "\x00" + distinguisher))
	return binary.LittleEndian.Uint64(sum[:8])
}

// seconds reads a trace's seconds to whole nanoseconds, as simapf does (half up beyond 9 decimals).
func seconds(text string) (time.Duration, error) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(text), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, err
	}
	ns := w * int64(time.Second)
	if frac != "" {
		digits := frac
		if len(digits) > 9 {
			digits = digits[:9]
		}
		f, err := strconv.ParseInt(digits+strings.Repeat("0", 9-len(digits)), 10, 64)
		if err != nil {
			return 0, err
		}
		ns += f
		if len(frac) > 9 && frac[9] >= '5' {
			ns++
		}
	}
	return time.Duration(ns), nil
}

func readTrace(path string) ([]*replayRequest, error) {
	handle, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer handle.Close()
	reader := csv.NewReader(bufio.NewReaderSize(handle, 1<<20))
	reader.ReuseRecord = true
	header, err := reader.Read()
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, name := range header {
		col[strings.TrimSpace(name)] = i
	}
	var requests []*replayRequest
	for {
		row, err := reader.Read()
		if err == io.EOF {
			return requests, nil
		}
		if err != nil {
			return nil, err
		}
		r := &replayRequest{id: row[col["id"]], queue: -1}
		fsName, dist, _ := strings.Cut(row[col["flow"]], "/")
		r.fsName, r.flowDist = fsName, dist
		if r.arrival, err = seconds(row[col["arrival_s"]]); err != nil {
			return nil, err
		}
		if r.service, err = seconds(row[col["service_s"]]); err != nil {
			return nil, err
		}
		if r.additionalLatency, err = seconds(row[col["additional_latency_s"]]); err != nil {
			return nil, err
		}
		if r.initial, err = strconv.ParseUint(row[col["initial_seats"]], 10, 64); err != nil {
			return nil, err
		}
		if r.final, err = strconv.ParseUint(row[col["final_seats"]], 10, 64); err != nil {
			return nil, err
		}
		requests = append(requests, r)
	}
}

func formatSeconds(d time.Duration) string {
	return fmt.Sprintf("%d.%09d", int64(d)/int64(time.Second), int64(d)%int64(time.Second))
}

func writeOutput(path string, requests []*replayRequest) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	w.WriteString("id,arrival_s,dispatched,rejected_reason,queue,dispatch_s,finish_s,wait_s\n")
	for _, r := range requests {
		queue := ""
		if r.queue >= 0 {
			queue = strconv.Itoa(r.queue)
		}
		if r.dispatched {
			fmt.Fprintf(w, "%s,%s,true,,%s,%s,%s,%s\n", r.id, formatSeconds(r.arrival), queue,
				formatSeconds(r.dispatch), formatSeconds(r.finish), formatSeconds(r.dispatch-r.arrival))
		} else {
			fmt.Fprintf(w, "%s,%s,false,%s,%s,,,%s\n", r.id, formatSeconds(r.arrival), r.reason, queue,
				formatSeconds(r.waited))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return out.Close()
}

func TestSimapfReplay(t *testing.T) {
	levelPath, tracePath, outPath := os.Getenv("SIMAPF_LEVEL"), os.Getenv("SIMAPF_TRACE"), os.Getenv("SIMAPF_OUT")
	if levelPath == "" || tracePath == "" || outPath == "" {
		t.Skip("SIMAPF_LEVEL, SIMAPF_TRACE and SIMAPF_OUT not set")
	}
	levelText, err := os.ReadFile(levelPath)
	if err != nil {
		t.Fatal(err)
	}
	level := replayLevel{Name: "level", RequestWaitLimitSeconds: 15}
	if err := json.Unmarshal(levelText, &level); err != nil {
		t.Fatal(err)
	}
	waitLimit := time.Duration(min(level.RequestWaitLimitSeconds, 60) * float64(time.Second))
	requests, err := readTrace(tracePath)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newSerialClock(start)
	counter := clk.active
	qsf := newTestableQueueSetFactory(clk, countingPromiseFactoryFactory(counter))
	qCfg := fq.QueuingConfig{Name: level.Name, DesiredNumQueues: level.Queues,
		QueueLengthLimit: level.QueueLengthLimit, HandSize: level.HandSize}
	qsc, err := qsf.BeginConstruction(qCfg, newGaugePair(clk), newExecSeatsGauge(clk), fq.NewNamedIntegrator(clk, level.Name))
	if err != nil {
		t.Fatal(err)
	}
	qs := qsComplete(qsc, level.ConcurrencyLimit)

	hashes := map[string]uint64{}
	for _, r := range requests {
		key := r.fsName + "/" + r.flowDist
		if _, ok := hashes[key]; !ok {
			hashes[key] = flowHash(r.fsName, r.flowDist)
		}
	}
	rejectReason := "queue-full"
	if level.Queues < 1 {
		rejectReason = "concurrency-limit"
	}
	// Each request's rank in arrival order: by time, then file order, as simapf arrives them.
	byArrival := make([]int, len(requests))
	for i := range byArrival {
		byArrival[i] = i
	}
	sort.SliceStable(byArrival, func(a, b int) bool { return requests[byArrival[a]].arrival < requests[byArrival[b]].arrival })
	rank := make([]int, len(requests))
	for k, i := range byArrival {
		rank[i] = k
	}
	for i, r := range requests {
		i, r := rank[i], r
		hash := hashes[r.fsName+"/"+r.flowDist]
		clk.at(start.Add(r.arrival), phaseArrival, i, func(time.Time) {
			ctx, cancel := context.WithCancel(context.Background())
			estimate := fcrequest.WorkEstimate{InitialSeats: r.initial, FinalSeats: r.final,
				AdditionalLatency: r.additionalLatency}
			req, _ := qs.StartRequest(ctx, &estimate, hash, r.flowDist, r.fsName, r.id, nil, nil)
			if req == nil {
				r.reason = rejectReason
				return
			}
			// The apiserver's wait limit is a deadline on the request's context; under the
			// test clock it is an event that cancels it. The request's promise has a
			// goroutine waiting for that, which must be counted active before it wakes (as
			// upstream's tests do); a rejected request may have none, so it is not cancelled.
			clk.at(start.Add(r.arrival+waitLimit), phaseTimeout, i, func(time.Time) {
				counter.Add(1)
				cancel()
			})
			if q := req.(*request).queue; q != nil {
				r.queue = q.index
			}
			req.Finish(func() {
				r.dispatched = true
				r.dispatch = clk.Since(start)
				clk.sleepAs(r.service, phaseFinish, i)
				r.finish = clk.Since(start) + r.additionalLatency
			})
			if !r.dispatched {
				r.reason = "time-out"
				r.waited = clk.Since(start) - r.arrival
			}
		})
	}
	clk.run()
	if err := writeOutput(outPath, requests); err != nil {
		t.Fatal(err)
	}
}
