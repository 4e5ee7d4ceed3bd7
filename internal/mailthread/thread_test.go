package mailthread

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// show writes threads as IMAP does (RFC 5256 §5), with 1-based positions.
func show(roots []*Node) string {
	var b strings.Builder
	var members func(n *Node)
	members = func(n *Node) {
		first := true
		for n != nil {
			if n.Index >= 0 {
				if !first {
					b.WriteByte(' ')
				}
				fmt.Fprint(&b, n.Index+1)
				first = false
			}
			switch len(n.Children) {
			case 0:
				return
			case 1:
				n = n.Children[0]
			default:
				if !first {
					b.WriteByte(' ')
				}
				for _, c := range n.Children {
					b.WriteByte('(')
					members(c)
					b.WriteByte(')')
				}
				return
			}
		}
	}
	for _, r := range roots {
		b.WriteByte('(')
		members(r)
		b.WriteByte(')')
	}
	return b.String()
}

func TestThreads(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2024, 3, d, 10, 0, 0, 0, time.UTC) }
	msgs := []Message{
		{MessageID: "<b@x>", InReplyTo: "<a@x>", Subject: "Re: apples", Sent: day(3)},
		{MessageID: "<a@x>", Subject: "apples", Sent: day(1)},
		{MessageID: "<c@x>", References: []string{"a@x", "b@x"}, Subject: "[list] Bananas", Sent: day(2)},
		{MessageID: "<d@x>", References: []string{"missing@x"}, Subject: "Fwd: cherries", Sent: day(4)},
		{MessageID: "<e@x>", References: []string{"missing@x"}, Subject: "cherries", Sent: day(5)},
		{MessageID: "<f@x>", Subject: "Re: apples", Sent: day(6)},
	}
	// 2 ← 1 ← 3 by references; 6 joins 2 by subject; 4 and 5 share the
	// missing parent (the same answers as imapd's TestThread).
	if got := show(References(msgs)); got != "(2 (1 3)(6))((4)(5))" {
		t.Errorf("References: %s", got)
	}
	if got := show(OrderedSubject(msgs)); got != "(2 (1)(6))(3)(4 5)" {
		t.Errorf("OrderedSubject: %s", got)
	}
	var order []int
	var depths []int
	Walk(References(msgs), func(n *Node, depth int) {
		order = append(order, n.Index)
		depths = append(depths, depth)
	})
	if fmt.Sprint(order, depths) != "[1 0 2 5 -1 3 4] [0 1 2 1 0 1 1]" {
		t.Errorf("Walk: %v %v", order, depths)
	}
	// A reference loop does not hang or lose messages.
	loop := []Message{{MessageID: "<x>", References: []string{"y"}}, {MessageID: "<y>", References: []string{"x"}}}
	n := 0
	Walk(References(loop), func(nd *Node, _ int) {
		if nd.Index >= 0 {
			n++
		}
	})
	if n != 2 {
		t.Errorf("loop: %d messages", n)
	}
}
