package kafkatest

import "testing"

// A cluster id starting with "-" made StorageTool format fail (it parsed
// the id as an option: "argument --cluster-id/-t: expected one argument"),
// about one cluster in 64; newClusterID never makes one.
func TestClusterIDNeverStartsWithDash(t *testing.T) {
	for range 10000 {
		if id := newClusterID(); len(id) != 22 || id[0] == '-' {
			t.Fatalf("cluster id %q", id)
		}
	}
}
