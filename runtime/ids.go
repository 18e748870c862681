package runtime

import (
	"fmt"
	"os"

	"github.com/google/uuid"
)

// newRunID returns a fresh run ID: a UUIDv7, so generated IDs sort by
// creation time.
func newRunID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// newWorkerID returns an ID unique to this process start: the host name and
// process ID for operators, and a random part so that two starts never share
// an ID.
func newWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.New().String()[:8])
}
