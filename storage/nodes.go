package storage

import (
	"context"
	"time"
)

// NodeReporter is implemented by a store on servers that can say what
// each server node has done so far: 'stem bench' reads it before and after
// a workload and prints the difference per step, so that a store spread
// over several nodes (a Redis Cluster's masters) shows how the work
// divides and what one step costs each node.
type NodeReporter interface {
	// NodeStats returns the figures of every node that serves the store's
	// data, counted since the node started (so only differences mean
	// anything), in a stable order.
	NodeStats(ctx context.Context) ([]NodeStat, error)
}

// NodeStat is what one node has done since it started.
type NodeStat struct {
	// Node names the node (host:port).
	Node string
	// Calls are the requests clients sent it (a Redis node's script
	// calls, EVAL and EVALSHA); Operations what it executed, requests and
	// the commands scripts ran included.
	Calls, Operations int64
	// CPU is the processor time the node's process used, where the node
	// reports it (zero where it does not).
	CPU time.Duration
	// Parts is how many of the store's parts (a Cluster store's shards)
	// the node serves; Keys how many keys it holds.
	Parts int
	Keys  int64
	// CallsAre and OperationsAre name what the node counts as Calls and
	// Operations, in the plural ("script calls", "commands";
	// "transactions", "rows").
	CallsAre, OperationsAre string
	// Lag is how late the node's counts may be: a reading taken Lag after
	// a workload ends holds all of it.
	Lag time.Duration
}

// Sub returns s less an earlier reading of the same node: what the node
// did between the two. Parts and Keys are s's.
func (s NodeStat) Sub(before NodeStat) NodeStat {
	s.Calls -= before.Calls
	s.Operations -= before.Operations
	s.CPU -= before.CPU
	return s
}
