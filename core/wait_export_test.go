package core

import "time"

// SetWaitPollInterval sets the interval of c's waiter loop between full
// rounds (WaitPollInterval otherwise), before its first Wait.
func SetWaitPollInterval(c *Client, d time.Duration) {
	c.waits.mu.Lock()
	c.waits.interval = d
	c.waits.mu.Unlock()
}

// WaitLoopRunning reports whether c's waiter loop runs.
func WaitLoopRunning(c *Client) bool {
	c.waits.mu.Lock()
	defer c.waits.mu.Unlock()
	return c.waits.running
}

// Waiting returns how many Wait calls of c wait now.
func Waiting(c *Client) int {
	c.waits.mu.Lock()
	defer c.waits.mu.Unlock()
	n := 0
	for _, ws := range c.waits.waiters {
		n += len(ws)
	}
	return n
}
