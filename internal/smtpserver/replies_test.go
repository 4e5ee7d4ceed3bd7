package smtpserver

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"pimail/internal/delivery"
)

func TestDeliveryErrorReplies(t *testing.T) {
	virus := &delivery.RejectError{Code: 554, Enhanced: [3]int{5, 7, 1}, Message: "message refused: virus found", Reason: "clamd: Eicar-Test-Signature"}
	tests := []struct {
		err      error
		code     int
		enhanced [3]int
	}{
		{fmt.Errorf("filter: %w", virus), 554, [3]int{5, 7, 1}},
		{&delivery.RejectError{Code: 451, Enhanced: [3]int{4, 7, 1}, Message: "try again later"}, 451, [3]int{4, 7, 1}},
		{delivery.ErrNoRecipients, replyNoRecipients.code, replyNoRecipients.enh},
		{errors.New("disk I/O error at /var/lib/pimail"), 451, [3]int{4, 3, 0}},
		// A full disk: 452 4.3.1 (RFC 5321 §4.2.3, RFC 3463 X.3.1).
		{fmt.Errorf("deliver x: store: write blob: %w", &os.PathError{Op: "write", Path: "/var/lib/pimail/blobs/tmp/x", Err: syscall.ENOSPC}), 452, [3]int{4, 3, 1}},
	}
	for _, tc := range tests {
		got := deliveryError(tc.err)
		if got.code != tc.code || got.enh != tc.enhanced {
			t.Errorf("%v: got %d %v, want %d %v", tc.err, got.code, got.enh, tc.code, tc.enhanced)
		}
	}
	if got := deliveryError(virus); got.text != virus.Message {
		t.Errorf("reply text %q, want the filter's client text", got.text)
	}
	if got := deliveryError(errors.New("disk I/O error at /var/lib/pimail")); got.text == "" || strings.Contains(got.text, "/var/lib") || strings.Contains(got.text, "disk") {
		t.Errorf("internal detail leaked or empty: %q", got.text)
	}
}
