package main

import "testing"

func TestPeerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""}, // local meta, no --peer-port: no peer service
		{[]string{"--peer-port", "0"}, "127.0.0.1:0"},
		{[]string{"--peer-port=9700", "--peer-host", "10.0.0.1"}, "10.0.0.1:9700"},
		{[]string{"--peer-host", "10.0.0.1", "--peer-port=9700"}, "10.0.0.1:9700"},
		{[]string{"--peer-host", "10.0.0.1"}, ""}, // no --peer-port with local meta: none
		{[]string{"--meta=etcd"}, "127.0.0.1:0"},
		{[]string{"--meta=etcd", "--peer-host", "10.0.0.1"}, "10.0.0.1:0"},
	} {
		o, err := parseArgs(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.PeerEndpoint; got != tc.want {
			t.Errorf("%v: endpoint %q, want %q", tc.args, got, tc.want)
		}
	}
	if _, err := parseArgs([]string{"--peer-port", "70000"}); err == nil {
		t.Error("--peer-port 70000 accepted")
	}
}
