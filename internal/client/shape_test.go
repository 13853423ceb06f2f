package client

import "testing"

// TestTreeShape: the process's table numbers shapes (internal/tree has the
// key's tests): one number for trees differing in ids and signatures only.
func TestTreeShape(t *testing.T) {
	a := TreeShape([]byte(`{"id":"o0000000000000001","signature":7,"typename":"t"}`))
	b := TreeShape([]byte(`{"id":"o00000000000000ff","signature":-9,"typename":"t"}`))
	c := TreeShape([]byte(`{"id":"o00000000000000ff","signature":-9,"typename":"u"}`))
	if a == 0 || a != b || c == a {
		t.Fatalf("shapes %d, %d, %d", a, b, c)
	}
}
