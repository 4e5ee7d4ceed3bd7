package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"pimail/internal/store"
)

func init() {
	register("queue", "list, show, retry or drop outbound messages", cmdQueue)
}

const queueUsage = `usage: pimail queue VERB [--data DIR] [ID]

verbs:
  queue list        every queued message: ID, age, next attempt, sender, recipients
  queue show ID     one message: recipients with their state and last error
  queue retry ID    try again now (a running server picks it up within its poll interval)
  queue drop ID     remove the message without sending it (no bounce)
`

func cmdQueue(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(os.Stderr, queueUsage)
		if len(args) == 0 {
			return usagef("missing verb")
		}
		return nil
	}
	verb := args[0]
	wantID := map[string]bool{"list": false, "show": true, "retry": true, "drop": true}
	needID, ok := wantID[verb]
	if !ok {
		return usagef("unknown verb %q", verb)
	}
	argsUsage := ""
	if needID {
		argsUsage = "ID"
	}
	fs := newFlags("queue "+verb, argsUsage, "")
	data := addDataFlags(fs)
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	var id int64
	if needID {
		if len(pos) != 1 {
			return usagef("want exactly one queue ID")
		}
		if id, err = strconv.ParseInt(pos[0], 10, 64); err != nil || id <= 0 {
			return usagef("bad queue ID %q", pos[0])
		}
	} else if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	loc, err := data.loc()
	if err != nil {
		return err
	}
	return withStore(loc, func(ctx context.Context, st store.Store) error {
		switch verb {
		case "list":
			return queueList(ctx, st)
		case "show":
			return queueShow(ctx, st, id)
		case "retry":
			if err := st.RetryQueueEntry(ctx, id, time.Now()); err != nil {
				return fmt.Errorf("retry %d: %w", id, err)
			}
			fmt.Printf("queue entry %d will be retried now\n", id)
		case "drop":
			if err := st.DropQueueEntry(ctx, id); err != nil {
				return fmt.Errorf("drop %d: %w", id, err)
			}
			fmt.Printf("queue entry %d dropped\n", id)
		}
		return nil
	})
}

func sender(from string) string {
	if from == "" {
		return "<>"
	}
	return from
}

func queueList(ctx context.Context, st store.OutboundQueue) error {
	es, err := st.QueueEntries(ctx)
	if err != nil {
		return fmt.Errorf("list queue: %w", err)
	}
	if len(es) == 0 {
		fmt.Println("queue is empty")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGE\tNEXT\tTRIES\tSIZE\tFROM\tPENDING")
	for _, e := range es {
		var pending []string
		for _, r := range e.Recipients {
			if r.State == store.QueuePending {
				pending = append(pending, r.Address)
			}
		}
		next := "now"
		if d := e.NextAttempt.Sub(now); d > 0 {
			next = "in " + d.Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", e.ID, now.Sub(e.Created).Round(time.Second), next,
			e.Attempts, e.Size, sender(e.MailFrom), strings.Join(pending, ", "))
	}
	return tw.Flush()
}

func queueShow(ctx context.Context, st store.OutboundQueue, id int64) error {
	e, err := st.QueueEntry(ctx, id)
	if err != nil {
		return fmt.Errorf("show %d: %w", id, err)
	}
	fmt.Printf("ID:            %d\n", e.ID)
	fmt.Printf("From:          %s\n", sender(e.MailFrom))
	fmt.Printf("Size:          %d bytes\n", e.Size)
	fmt.Printf("Queued:        %s\n", e.Created.Format(time.RFC3339))
	fmt.Printf("Next attempt:  %s\n", e.NextAttempt.Format(time.RFC3339))
	fmt.Printf("Attempts:      %d\n", e.Attempts)
	fmt.Printf("Delay notice:  %v\n", e.DelayNotified)
	fmt.Println("Recipients:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, r := range e.Recipients {
		last := "-"
		if !r.LastAttempt.IsZero() {
			last = r.LastAttempt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d tries\t%s\t%s\n", r.Address, r.State, r.Attempts, last, r.LastError)
	}
	return tw.Flush()
}
