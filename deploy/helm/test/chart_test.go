// Package test lints and renders the vineyard Helm chart (deploy/helm/vineyard)
// with Helm's own Go packages, and decodes every rendered object strictly
// into the Kubernetes API types: a field the API does not have, or a value
// of the wrong type, fails. It runs for the default values and for each
// option docs/kubernetes.md documents. A module of its own, so that the
// project's go.mod stays free of Helm and Kubernetes.
package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "../vineyard"
	release   = "v6d"
	namespace = "vineyard"
)

// kinds maps apiVersion/kind to a new value of its Go type: a rendered
// object of any other kind fails the test.
var kinds = map[string]func() any{
	"v1/Service":          func() any { return &corev1.Service{} },
	"v1/Secret":           func() any { return &corev1.Secret{} },
	"apps/v1/DaemonSet":   func() any { return &appsv1.DaemonSet{} },
	"apps/v1/StatefulSet": func() any { return &appsv1.StatefulSet{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
}

// rendered is one release's objects, decoded.
type rendered struct {
	objects map[string]any // "Kind/name" → typed object
}

func (r rendered) daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	for _, o := range r.objects {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			return ds
		}
	}
	t.Fatal("no DaemonSet rendered")
	return nil
}

func (r rendered) count(kind string) int {
	n := 0
	for k := range r.objects {
		if strings.HasPrefix(k, kind+"/") {
			n++
		}
	}
	return n
}

// decodeStrict decodes JSON into v, failing on fields v's type lacks.
func decodeStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

// decodeManifest decodes one YAML document into its typed object.
func decodeManifest(doc []byte) (string, any, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return "", nil, err
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return "", nil, err
	}
	mk, ok := kinds[head.APIVersion+"/"+head.Kind]
	if !ok {
		return "", nil, fmt.Errorf("%s %s: a kind this test does not know", head.APIVersion, head.Kind)
	}
	if head.Metadata.Name == "" || head.Metadata.Namespace != namespace {
		return "", nil, fmt.Errorf("%s: name %q, namespace %q", head.Kind, head.Metadata.Name, head.Metadata.Namespace)
	}
	obj := mk()
	if err := decodeStrict(js, obj); err != nil {
		return "", nil, fmt.Errorf("%s %s: %w", head.Kind, head.Metadata.Name, err)
	}
	return head.Kind + "/" + head.Metadata.Name, obj, nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// render lints the chart with values and renders it as a first install.
func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	linted := lint.RunAll(chartDir, values, namespace)
	for _, m := range linted.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := util.ToRenderValues(ch, values, common.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{objects: map[string]any{}}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasSuffix(name, ".tpl") {
			continue
		}
		for _, doc := range docSep.Split(out[name], -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			key, obj, err := decodeManifest([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			if _, dup := r.objects[key]; dup {
				t.Fatalf("%s rendered twice", key)
			}
			r.objects[key] = obj
		}
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// values parses YAML into Helm's values.
func values(t *testing.T, text string) map[string]any {
	t.Helper()
	v, err := common.ReadValues([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// args returns the daemon container's arguments.
func daemonArgs(t *testing.T, ds *appsv1.DaemonSet) []string {
	t.Helper()
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "vineyardd" {
			return c.Args
		}
	}
	t.Fatal("no vineyardd container")
	return nil
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

func argWithPrefix(args []string, prefix string) string {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return a
		}
	}
	return ""
}

// checkFlagsExist checks every --flag the chart passes is one the daemon
// lists in --help (VINEYARDD: the built daemon; make test-helm sets it).
func checkFlagsExist(t *testing.T, args []string) {
	t.Helper()
	daemon := os.Getenv("VINEYARDD")
	if daemon == "" {
		t.Log("VINEYARDD not set: the flags are not checked against the daemon's --help")
		return
	}
	help, err := exec.Command(daemon, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v", daemon, err)
	}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "--") {
			continue
		}
		if name == "--norpc" {
			name = "--rpc" // its negation
		}
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + `( |$)`).Match(help) {
			t.Errorf("the chart passes %s, which %s --help does not list", name, daemon)
		}
	}
}

func TestDefaults(t *testing.T) {
	r := render(t, nil)
	ds := r.daemonSet(t)
	args := daemonArgs(t, ds)
	checkFlagsExist(t, args)
	for _, want := range []string{
		"--socket=/var/run/vineyard/vineyard.sock", "--size=256Mi", "--meta=etcd",
		"--etcd-endpoint=http://v6d-vineyard-etcd-0.v6d-vineyard-etcd.vineyard.svc:2379",
		"--rpc-host=$(POD_IP)", "--rpc-auth-file=/etc/vineyard/rpc/secret",
		"--peer-secret-file=/etc/vineyard/peer/secret", "--metrics-host=$(POD_IP)", "--metrics-port=9090",
	} {
		if !hasArg(args, want) {
			t.Errorf("daemon args lack %s: %v", want, args)
		}
	}
	if argWithPrefix(args, "--spill") != "" {
		t.Errorf("spill is off by default: %v", args)
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.ReadinessProbe.HTTPGet.Port.StrVal != "metrics" {
		t.Errorf("probes: %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if sc := c.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || *sc.RunAsUser == 0 {
		t.Errorf("the daemon must run as non-root: %+v", sc)
	}
	var hostPath string
	for _, v := range spec.Volumes {
		if v.Name == "socket" && v.HostPath != nil {
			hostPath = v.HostPath.Path
		}
		if v.Name == "dshm" || (v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory) {
			t.Errorf("no /dev/shm volume is needed (memfd): %+v", v)
		}
	}
	if hostPath != "/var/run/vineyard" {
		t.Errorf("socket hostPath %q", hostPath)
	}
	if len(spec.InitContainers) != 1 || !strings.Contains(strings.Join(spec.InitContainers[0].Command, " "), "chown 65532:65532 /host/socket") {
		t.Errorf("the socket directory is not given to the daemon's user: %+v", spec.InitContainers)
	}
	if r.count("StatefulSet") != 1 || r.count("Secret") != 2 || r.count("ServiceMonitor") != 0 {
		t.Errorf("objects: %v", keys(r.objects))
	}
	sec := r.objects["Secret/v6d-vineyard-rpc"].(*corev1.Secret)
	if len(sec.Data["secret"]) < 32 {
		t.Errorf("the generated rpc secret is %d bytes", len(sec.Data["secret"]))
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOptions renders each documented option (docs/kubernetes.md, "Values").
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		check  func(t *testing.T, r rendered, args []string)
	}{
		{"size and memory", `
vineyard: {size: 8Gi, reserveMemory: true, logFormat: text, extraArgs: ["--max-connections=4096"]}
resources: {requests: {cpu: "1", memory: 10Gi}, limits: {memory: 10Gi}}`,
			func(t *testing.T, r rendered, args []string) {
				for _, want := range []string{"--size=8Gi", "--reserve-memory", "--log-format=text", "--max-connections=4096"} {
					if !hasArg(args, want) {
						t.Errorf("args lack %s", want)
					}
				}
				lim := r.daemonSet(t).Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
				if lim.String() != "10Gi" {
					t.Errorf("memory limit %s", lim.String())
				}
			}},
		{"spill on an emptyDir", `spill: {enabled: true, lowerRate: 0.5, upperRate: 0.9, volume: {sizeLimit: 20Gi}}`,
			func(t *testing.T, r rendered, args []string) {
				for _, want := range []string{"--spill-path=/var/lib/vineyard/spill/objects", "--spill-lower-rate=0.5", "--spill-upper-rate=0.9"} {
					if !hasArg(args, want) {
						t.Errorf("args lack %s", want)
					}
				}
				found := false
				for _, v := range r.daemonSet(t).Spec.Template.Spec.Volumes {
					if v.Name == "spill" && v.EmptyDir != nil && v.EmptyDir.SizeLimit.String() == "20Gi" {
						found = true
					}
				}
				if !found {
					t.Error("no spill emptyDir of 20Gi")
				}
			}},
		{"spill on the host", `spill: {enabled: true, volume: {type: hostPath, hostPath: /mnt/ssd/vineyard}}`,
			func(t *testing.T, r rendered, args []string) {
				spec := r.daemonSet(t).Spec.Template.Spec
				if !strings.Contains(strings.Join(spec.InitContainers[0].Command, " "), "/host/spill") {
					t.Error("the init container does not give the spill directory to the daemon")
				}
				found := false
				for _, v := range spec.Volumes {
					if v.Name == "spill" && v.HostPath != nil && v.HostPath.Path == "/mnt/ssd/vineyard" {
						found = true
					}
				}
				if !found {
					t.Error("no spill hostPath")
				}
			}},
		{"external etcd", `etcd: {bundled: false, endpoints: ["http://etcd-a:2379", "http://etcd-b:2379"]}
vineyard: {etcdPrefix: team-a}`,
			func(t *testing.T, r rendered, args []string) {
				if !hasArg(args, "--etcd-endpoint=http://etcd-a:2379,http://etcd-b:2379") || !hasArg(args, "--etcd-prefix=team-a") {
					t.Errorf("args: %v", args)
				}
				if r.count("StatefulSet") != 0 {
					t.Error("a bundled etcd with an external one")
				}
			}},
		{"no etcd", `etcd: {bundled: false}`,
			func(t *testing.T, r rendered, args []string) {
				if !hasArg(args, "--meta=local") || argWithPrefix(args, "--etcd") != "" {
					t.Errorf("args: %v", args)
				}
			}},
		{"bundled etcd of three, persistent", `etcd: {replicas: 3, persistence: {enabled: true, size: 5Gi, storageClass: fast}}`,
			func(t *testing.T, r rendered, args []string) {
				ss := r.objects["StatefulSet/v6d-vineyard-etcd"].(*appsv1.StatefulSet)
				if *ss.Spec.Replicas != 3 || len(ss.Spec.VolumeClaimTemplates) != 1 ||
					*ss.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "fast" {
					t.Errorf("etcd: %+v", ss.Spec)
				}
				if strings.Count(argWithPrefix(args, "--etcd-endpoint="), "http://") != 3 {
					t.Errorf("args: %v", args)
				}
				cmd := strings.Join(ss.Spec.Template.Spec.Containers[0].Command, " ")
				if !strings.Contains(cmd, "v6d-vineyard-etcd-2=http://v6d-vineyard-etcd-2.v6d-vineyard-etcd.vineyard.svc:2380") {
					t.Errorf("etcd command: %s", cmd)
				}
			}},
		{"secrets of yours", `rpc: {auth: {existingSecret: my-rpc}}
peer: {auth: {existingSecret: my-peer}}`,
			func(t *testing.T, r rendered, args []string) {
				if r.count("Secret") != 0 {
					t.Errorf("secrets rendered: %v", keys(r.objects))
				}
				names := map[string]bool{}
				for _, v := range r.daemonSet(t).Spec.Template.Spec.Volumes {
					if v.Secret != nil {
						names[v.Secret.SecretName] = true
					}
				}
				if !names["my-rpc"] || !names["my-peer"] {
					t.Errorf("secret volumes: %v", names)
				}
			}},
		{"given secrets", `rpc: {auth: {secret: s3cret-rpc}}
peer: {auth: {secret: s3cret-peer}}`,
			func(t *testing.T, r rendered, args []string) {
				if got := string(r.objects["Secret/v6d-vineyard-rpc"].(*corev1.Secret).Data["secret"]); got != "s3cret-rpc" {
					t.Errorf("rpc secret %q", got)
				}
			}},
		{"no TCP listener", `rpc: {enabled: false}`,
			func(t *testing.T, r rendered, args []string) {
				if !hasArg(args, "--norpc") || argWithPrefix(args, "--rpc-") != "" || r.count("Secret") != 1 {
					t.Errorf("args %v, objects %v", args, keys(r.objects))
				}
			}},
		{"metrics service", `metrics: {port: 9400, service: {enabled: true}}`,
			func(t *testing.T, r rendered, args []string) {
				svc := r.objects["Service/v6d-vineyard-metrics"].(*corev1.Service)
				if svc.Spec.Ports[0].Port != 9400 || !hasArg(args, "--metrics-port=9400") {
					t.Errorf("service %+v args %v", svc.Spec.Ports, args)
				}
			}},
		{"service monitor", `metrics: {serviceMonitor: {enabled: true, interval: 15s, labels: {release: prom}}}`,
			func(t *testing.T, r rendered, args []string) {
				sm := r.objects["ServiceMonitor/v6d-vineyard"].(*monitoringv1.ServiceMonitor)
				if sm.Labels["release"] != "prom" || len(sm.Spec.Endpoints) != 1 ||
					string(sm.Spec.Endpoints[0].Interval) != "15s" || sm.Spec.Endpoints[0].Port != "metrics" {
					t.Errorf("ServiceMonitor: %+v", sm)
				}
				if _, ok := r.objects["Service/v6d-vineyard-metrics"]; !ok {
					t.Error("a ServiceMonitor without its Service")
				}
			}},
		{"socket and scheduling", `
socket: {hostPath: /run/v6d, mode: "0600", groupId: 2000}
nodeSelector: {vineyard: "true"}
tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
priorityClassName: system-node-critical
image: {repository: registry.example/v6d, tag: "1.2.3"}
imagePullSecrets: [{name: regcred}]`,
			func(t *testing.T, r rendered, args []string) {
				spec := r.daemonSet(t).Spec.Template.Spec
				if spec.Volumes[0].HostPath.Path != "/run/v6d" || !hasArg(args, "--socket-mode=0600") ||
					spec.NodeSelector["vineyard"] != "true" || len(spec.Tolerations) != 1 ||
					spec.PriorityClassName != "system-node-critical" ||
					spec.Containers[0].Image != "registry.example/v6d:1.2.3" || spec.ImagePullSecrets[0].Name != "regcred" {
					t.Errorf("spec: %+v", spec)
				}
				if !strings.Contains(strings.Join(spec.InitContainers[0].Command, " "), "chown 65532:2000 /host/socket") {
					t.Errorf("init: %v", spec.InitContainers[0].Command)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, values(t, tc.values))
			args := daemonArgs(t, r.daemonSet(t))
			checkFlagsExist(t, args)
			tc.check(t, r, args)
		})
	}
}

// TestStrictDecodingFails: the decoding this test relies on refuses a
// misspelled field and a value of the wrong type.
func TestStrictDecodingFails(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelled field": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: x, namespace: vineyard}
spec:
  template:
    spec:
      containers: [{name: c, image: i, imagePullPolicyy: Always}]`,
		"wrong type": `apiVersion: v1
kind: Service
metadata: {name: x, namespace: vineyard}
spec: {ports: [{port: "ninety"}]}`,
		"unknown kind": `apiVersion: v1
kind: Pod
metadata: {name: x, namespace: vineyard}`,
		"misspelled monitor field": `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: x, namespace: vineyard}
spec: {endpoints: [{prot: metrics}]}`,
	} {
		if _, _, err := decodeManifest([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// TestBadValuesFail: values the chart cannot honour stop the render.
func TestBadValuesFail(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"spill volume type": `spill: {enabled: true, volume: {type: nfs}}`,
		"no etcd members":   `etcd: {replicas: 0}`,
	} {
		vals, err := util.ToRenderValues(ch, values(t, text), common.ReleaseOptions{Name: release, Namespace: namespace}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Render(ch, vals); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}
