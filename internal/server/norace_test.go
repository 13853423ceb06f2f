//go:build !race

package server

// idleConns is the number of idle connections TestIdleConnectionsHoldNoThread
// opens.
const idleConns = 10000
