// What the watch cache's sort of a LIST costs (k8s.io/apiserver 1.27-1.31 sorted every object
// it held by key before filtering, with sort.Sort over an interface Less): store elements are
// made in a Go map, listed in its order, and sorted as the cacher's sortableStoreElements does.
// simapf's request_cpu.cache_sort_core_s_per_comparison is this program's figure; run it with
//
//	go run ./benchmarks/go/watchcache-sort
//
// docs/benchmarks.md records what it printed and on which machine.
package main

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"time"
)

// storeElement has the watch cache's fields: the key, the object and its label and field sets.
type storeElement struct {
	Key    string
	Object any
	Labels map[string]string
	Fields map[string]string
}

type sortableStoreElements []interface{}

func (s sortableStoreElements) Len() int { return len(s) }
func (s sortableStoreElements) Less(i, j int) bool {
	return s[i].(*storeElement).Key < s[j].(*storeElement).Key
}
func (s sortableStoreElements) Swap(i, j int) { s[i], s[j] = s[j], s[i] }

func main() {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{1_000, 10_000, 100_000, 300_000, 1_000_000} {
		store := make(map[string]interface{}, n)
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("/registry/configmaps/ns-0/configmap-%d", rng.Int63())
			store[key] = &storeElement{Key: key, Object: new([64]byte), Labels: map[string]string{"app": "x"}}
		}
		best := math.Inf(1)
		for run := 0; run < 5; run++ {
			list := make([]interface{}, 0, n)
			for _, elem := range store {
				list = append(list, elem)
			}
			start := time.Now()
			sort.Sort(sortableStoreElements(list))
			if s := time.Since(start).Seconds(); s < best {
				best = s
			}
		}
		comparisons := float64(n) * math.Log2(float64(n))
		fmt.Printf("%9d objects: %8.4f s, %6.1f ns an object, %5.2f ns per n·log2(n)\n",
			n, best, best/float64(n)*1e9, best/comparisons*1e9)
	}
}
