package storage

import "strings"

// Nearest returns the candidate closest to name (an edit or two away, or
// one it begins), or "" when none is close: the "did you mean" of error
// messages about a misspelled workflow, queue, command or flag.
func Nearest(name string, candidates []string) string {
	best, dist := "", 3
	for _, n := range candidates {
		d := editDistance(name, n)
		if strings.HasPrefix(n, name) && len(name) >= 2 {
			d = min(d, 1)
		}
		if d < dist {
			best, dist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
