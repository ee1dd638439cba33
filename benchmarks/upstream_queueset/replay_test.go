// The simapf replay format run through kube-apiserver's own queueset.
//
// benchmarks/replay_upstream.py copies k8s.io/apiserver's queueset package beside this
// file and builds them together as one test binary, so that the harness can use the
// package's own test clock and counting promises (unexported) the way its tests do.
// The binary reads the same LEVEL.json and TRACE.csv as `simapf replay` and writes the
// same OUT.csv, so the two can be compared request by request and timed whole-process.
//
//	SIMAPF_LEVEL=level.json SIMAPF_TRACE=trace.csv SIMAPF_OUT=out.csv \
//	    ./queueset.test -test.run '^TestSimapfReplay$'
package queueset

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	testeventclock "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/testing/eventclock"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

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
	clk, counter := testeventclock.NewFake(start, 0, nil)
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
	for _, r := range requests {
		r := r
		hash := hashes[r.fsName+"/"+r.flowDist]
		clk.EventAfterTime(func(time.Time) {
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
			clk.EventAfterTime(func(time.Time) {
				counter.Add(1)
				cancel()
			}, start.Add(r.arrival+waitLimit))
			if q := req.(*request).queue; q != nil {
				r.queue = q.index
			}
			req.Finish(func() {
				r.dispatched = true
				r.dispatch = clk.Since(start)
				clk.Sleep(r.service)
				r.finish = clk.Since(start) + r.additionalLatency
			})
			if !r.dispatched {
				r.reason = "time-out"
				r.waited = clk.Since(start) - r.arrival
			}
		}, start.Add(r.arrival))
	}
	clk.Run(nil)
	if err := writeOutput(outPath, requests); err != nil {
		t.Fatal(err)
	}
}
