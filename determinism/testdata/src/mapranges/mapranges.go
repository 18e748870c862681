// Package mapranges has map ranges whose bodies depend on the order.
package mapranges

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stemflow/stem/runtime"
)

// Sum ranges over maps in order-dependent ways.
//
//stem:workflow name=mapranges.sum
func Sum(ctx *runtime.WorkflowContext, m map[string]float64) (string, error) {
	total := 0.0
	for _, v := range m { // want `^range over a map in workflow mapranges.sum: Go randomizes map order`
		total += v // floating-point addition depends on the order
	}
	inverse := map[float64]string{}
	for k, v := range m { // want `^range over a map in workflow`
		inverse[v] = k // the last key wins
	}
	groups := map[string][]string{}
	for k := range m { // want `^range over a map in workflow`
		groups[k[:1]] = append(groups[k[:1]], k)
	}
	var keys []string
	for k := range m { // want `^range over a map in workflow`
		keys = append(keys, k)
	}
	fmt.Println(keys) // not sorted right after
	sort.Strings(keys)
	var first string
	for k := range m { // want `^range over a map in workflow`
		first = k
		break
	}
	var last string
	for last = range m { // want `^range over a map in workflow`
	}
	n := 0
	seen := map[string]int{}
	for k := range m { // want `^range over a map in workflow`
		seen[k] = n // reads what another statement writes
		n++
	}
	var b strings.Builder
	for k := range m { // want `^range over a map in workflow`
		b.WriteString(k)
	}
	return fmt.Sprint(total, inverse, groups, first, last, seen, b.String()), nil
}
