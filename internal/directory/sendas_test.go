package directory

import (
	"slices"
	"testing"

	"pimail/internal/store"
)

func TestSendsAs(t *testing.T) {
	aliases := []store.Alias{
		{Address: "Sales@example.com", Targets: []string{"ann@example.com", "bob@example.com"}},
		{Address: "info@example.com", Targets: []string{"bob@example.com"}},
		{Address: "@example.org", Targets: []string{"ann@example.com"}},
	}
	for addr, want := range map[string]bool{
		"ann@example.com": true, "ANN@example.com": true, "ann+lists@example.com": true, "sales@example.com": true,
		"sales+x@example.com": true, "info@example.com": false, "anyone@example.org": false, "ann": false, "a@b@c": false,
	} {
		if got := SendsAs("ann@example.com", addr, aliases); got != want {
			t.Errorf("SendsAs(%q) = %v", addr, got)
		}
	}
	if got := SenderAddresses("Ann@example.com", aliases); !slices.Equal(got, []string{"ann@example.com", "sales@example.com"}) {
		t.Errorf("SenderAddresses = %q", got)
	}
}
