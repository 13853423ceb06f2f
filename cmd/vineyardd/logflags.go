package main

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/v6d-io/v6d-go/internal/server"
)

// logFileName is the file -log_dir writes, appended to.
const logFileName = "vineyardd.log"

func init() {
	flags = append(flags,
		flagDef{"log-format", "FORMAT", func(d *settings) string { return d.logFormat },
			"format of the log lines: text (key=value) or json (one object a line)",
			func(o *settings, v string) error {
				if v != "text" && v != "json" {
					return fmt.Errorf("--log-format %q: want text or json", v)
				}
				o.logFormat = v
				return nil
			}},
		flagDef{"log-dir", "DIR", constant("none (stderr only)"),
			"also append the log to DIR/" + logFileName + " (upstream's glog -log_dir; the directory is\n" +
				"created if missing)",
			func(o *settings, v string) error { o.logDir = v; return nil }},
		flagDef{"logtostderr", "", constant("false"), "glog's: log to stderr only, never to --log-dir",
			boolSetter(func(o *settings) *bool { return &o.logToStderr })},
		flagDef{"alsologtostderr", "", constant("true"), "glog's: the log always goes to stderr here too",
			func(*settings, string) error { return nil }},
		flagDef{"v", "LEVEL", constant("0"), "glog's verbosity: above 0 is --log-level debug",
			func(o *settings, v string) error {
				n, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("-v %q is not a verbosity level (an integer)", v)
				}
				if n > 0 {
					o.logLevel = slog.LevelDebug
				}
				return nil
			}},
		flagDef{"metrics-port", "PORT", constant("0 (off; " + strconv.Itoa(server.DefaultMetricsPort) + " with --metrics)"),
			"TCP port of the HTTP listener serving Prometheus /metrics, /healthz and /readyz; 0: none",
			func(o *settings, v string) error {
				n, err := strconv.ParseUint(v, 10, 16)
				if err != nil {
					return fmt.Errorf("--metrics-port %q is not a port number (0-65535)", v)
				}
				o.metricsPort = int(n)
				return nil
			}},
		flagDef{"metrics-host", "HOST", func(d *settings) string { return d.metricsHost },
			"address the metrics listener binds (0.0.0.0 for every interface: it serves no objects,\n" +
				"only counts, and needs no secret)",
			func(o *settings, v string) error {
				if v == "" {
					return fmt.Errorf("--metrics-host must not be empty")
				}
				o.metricsHost = v
				return nil
			}},
	)
}

// newLogger returns the daemon's logger: slog in --log-format, at
// --log-level, to stderr and, with --log-dir, appended to a file there too.
// The caller closes the returned closer (the file) at exit.
func newLogger(o *settings, stderr io.Writer) (*slog.Logger, io.Closer, error) {
	w := stderr
	var closer io.Closer = io.NopCloser(nil)
	if o.logDir != "" && !o.logToStderr {
		if err := os.MkdirAll(o.logDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("--log-dir: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(o.logDir, logFileName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-dir: %w", err)
		}
		w, closer = io.MultiWriter(stderr, f), f
	}
	opts := &slog.HandlerOptions{Level: o.logLevel}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h), closer, nil
}

// secondsDuration is n seconds, saturating.
func secondsDuration(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}
