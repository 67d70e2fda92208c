package keys

import "testing"

func TestReadyKey(t *testing.T) {
	l := New("c")
	if got := l.Ready(7, "n1"); got != "/tenure/c/ready/7/n1" {
		t.Fatalf("Ready = %q", got)
	}
	for _, tc := range []struct {
		key  string
		p    int
		id   string
		isOK bool
	}{
		{"/tenure/c/ready/7/n1", 7, "n1", true},
		{"/tenure/c/ready/0/a", 0, "a", true},
		{"/tenure/c/ready/07/a", 0, "", false},
		{"/tenure/c/ready/7/", 0, "", false},
		{"/tenure/c/ready/7", 0, "", false},
		{"/tenure/c/ready//a", 0, "", false},
		{"/tenure/c/ready/-1/a", 0, "", false},
		{"/tenure/c/ready/x/a", 0, "", false},
		{"/tenure/c/claims/7", 0, "", false},
	} {
		p, id, ok := l.ReadyKey(tc.key)
		if ok != tc.isOK || ok && (p != tc.p || id != tc.id) {
			t.Errorf("ReadyKey(%q) = %d, %q, %v", tc.key, p, id, ok)
		}
	}
}
