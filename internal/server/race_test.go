//go:build race

package server

// idleConns is the number of idle connections TestIdleConnectionsHoldNoThread
// opens: the race detector allows 8128 goroutines, one per connection here.
const idleConns = 2000
