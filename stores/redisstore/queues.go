package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

var queueStatsScript = newScript("queuestats")

func init() { allScripts = append(allScripts, queueStatsScript) }

// QueueStats implements storage.Store: one read-only script reads the
// sizes of each queue's status indexes (iqs:<status>:<queue>; for the
// default queue, which has none, those of all runs less the other
// queues'), and in the queue's set of queued runs by ReadyAt
// (qf:<queue>) counts those not yet due and reads the lowest score of
// the others, the oldest ready run's ReadyAt. It costs O(queues), never
// a scan.
func (s *Store) QueueStats(ctx context.Context, queues []string) ([]storage.QueueStats, error) {
	for _, q := range queues {
		if err := storage.CheckQueueName(q); err != nil {
			return nil, fmt.Errorf("redisstore: queue stats: %w", err)
		}
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if len(queues) == 0 {
		return nil, nil
	}
	args := make([]any, len(queues))
	for i, q := range queues {
		args[i] = q
	}
	v, err := s.run(ctx, queueStatsScript, []string{s.keys.indexAll()}, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: queue stats: %w", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) != len(queues) {
		return nil, fmt.Errorf("redisstore: queue stats: unexpected reply")
	}
	out := make([]storage.QueueStats, len(queues))
	for i, item := range list {
		n, ok := item.([]any)
		if !ok || len(n) != 6 {
			return nil, fmt.Errorf("redisstore: queue stats: unexpected reply")
		}
		c := make([]int64, 6)
		for j := range c {
			c[j], _ = n[j].(int64)
		}
		out[i] = storage.QueueStats{Queue: queues[i], Ready: int(c[0]), Scheduled: int(c[1]), Running: int(c[2]),
			Waiting: int(c[3]), Paused: int(c[4]), OldestReady: time.Duration(c[5]) * time.Microsecond}
	}
	return out, nil
}
