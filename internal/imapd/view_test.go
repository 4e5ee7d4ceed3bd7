package imapd

import (
	"slices"
	"testing"

	"pimail/internal/imapwire"
)

// "n:*" and "*:n" with n beyond the last message mean the last message
// (RFC 9051 §9: "*" is the largest number in use); explicit numbers
// beyond it are an error.
func TestResolveStarBeyondMailbox(t *testing.T) {
	v := &mailboxView{uids: []uint32{10, 20}}
	for _, tc := range []struct {
		set  imapwire.SeqRange
		want []int
		err  bool
	}{
		{imapwire.SeqRange{Start: 5, Stop: 0}, []int{1}, false},
		{imapwire.SeqRange{Start: 0, Stop: 5}, []int{1}, false},
		{imapwire.SeqRange{Start: 1, Stop: 0}, []int{0, 1}, false},
		{imapwire.SeqRange{Start: 0, Stop: 0}, []int{1}, false},
		{imapwire.SeqRange{Start: 1, Stop: 5}, nil, true},
	} {
		got, err := v.resolve(imapwire.SeqSet{Ranges: []imapwire.SeqRange{tc.set}}, false)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("resolve %+v = %v, %v; want %v (error %v)", tc.set, got, err, tc.want, tc.err)
		}
		if err == nil {
			v.uidSet(got) // must not panic
		}
	}
}
