package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// Search answers a search program (RFC 9051 §6.4.4) with one statement
// over the mailbox's rows: flags, dates and sizes from columns, SUBJECT,
// FROM, TO, CC and BCC from the lower-cased header columns (a byte
// substring test is store.ContainsFold's match), TEXT and BODY from the
// searchable text of each blob (store.SearchableText, lower-cased) with
// LIKE, which the trigram indexes (pg_trgm) answer for needles of three
// characters and more; PostgreSQL rechecks every candidate, so the
// result is the exact substring match, for short needles too. HEADER is
// narrowed the same way and decided on the stored header
// (store.HeaderFieldContains).
//
// The statement is planned for its arguments each time
// (QueryExecModeExec): a plan made without knowing the needle cannot tell
// whether the index pays.
func (s *Store) Search(ctx context.Context, mailboxID int64, q store.SearchQuery) (store.SearchResult, error) {
	var res store.SearchResult
	err := s.readMailbox(ctx, mailboxID, func(tx querier) (int, error) {
		res = store.SearchResult{}
		c := &searchSQL{args: params{pgx.QueryExecModeExec, mailboxID}, headers: map[[2]string]string{}}
		if err := c.compile(ctx, tx, mailboxID, q, 0); err != nil {
			return 0, err
		}
		joins := " JOIN blobs b ON b.id = m.blob_id JOIN blob_meta i ON i.blob_id = m.blob_id"
		if c.needText {
			joins += " JOIN blob_text t ON t.blob_id = m.blob_id"
		}
		rows, _ := tx.Query(ctx, "SELECT m.uid, m.modseq FROM mail m"+joins+" WHERE m.mailbox_id = $1 AND ("+c.sb.String()+") ORDER BY m.uid",
			c.args...)
		var uid uint32
		var ms uint64
		_, err := pgx.ForEachRow(rows, []any{&uid, &ms}, func() error {
			res.UIDs = append(res.UIDs, uid)
			res.ModSeqs = append(res.ModSeqs, ms)
			return nil
		})
		return len(res.UIDs), err
	})
	if err != nil {
		return store.SearchResult{}, err
	}
	return res, nil
}

// maxSearchDepth bounds the nesting of a search program.
const maxSearchDepth = 100

// searchSQL accumulates the WHERE expression and its arguments. The
// first two arguments are the execution mode and the mailbox ($1).
type searchSQL struct {
	sb       strings.Builder
	args     params
	needText bool
	// headers holds the argument of each HEADER criterion's blob set.
	headers map[[2]string]string
}

// arg adds an argument and returns its placeholder ($n counts the
// mailbox as $1, not the mode).
func (c *searchSQL) arg(v any) string {
	c.args = append(c.args, v)
	return "$" + strconv.Itoa(len(c.args)-1)
}

func (c *searchSQL) raw(s string) { c.sb.WriteString(s) }

// likeContains is a LIKE pattern for "contains s".
func likeContains(s string) string { return "%" + store.LikeEscaper.Replace(s) + "%" }

func (c *searchSQL) compile(ctx context.Context, tx querier, mailboxID int64, q store.SearchQuery, depth int) error {
	if depth > maxSearchDepth {
		return fmt.Errorf("search program nested too deeply: %w", store.ErrInvalid)
	}
	switch q.Op {
	case store.SearchAll:
		c.raw("true")
	case store.SearchAnd, store.SearchOr:
		if len(q.Children) == 0 {
			c.raw(map[bool]string{true: "true", false: "false"}[q.Op == store.SearchAnd])
			return nil
		}
		sep := map[bool]string{true: " AND ", false: " OR "}[q.Op == store.SearchAnd]
		c.raw("(")
		for i, ch := range q.Children {
			if i > 0 {
				c.raw(sep)
			}
			if err := c.compile(ctx, tx, mailboxID, ch, depth+1); err != nil {
				return err
			}
		}
		c.raw(")")
	case store.SearchNot:
		if len(q.Children) != 1 {
			return fmt.Errorf("search NOT needs one operand: %w", store.ErrInvalid)
		}
		c.raw("NOT (")
		if err := c.compile(ctx, tx, mailboxID, q.Children[0], depth+1); err != nil {
			return err
		}
		c.raw(")")
	case store.SearchUIDs:
		c.uids(q.UIDs)
	case store.SearchFlag:
		f := q.Flags & store.AllFlags
		c.raw(fmt.Sprintf("(m.flags & %d) = %d", f, f))
	case store.SearchKeyword:
		c.raw("strpos(' ' || lower(m.keywords) || ' ', " + c.arg(" "+strings.ToLower(q.Keyword)+" ") + ") > 0")
	case store.SearchModSeq:
		c.raw("m.modseq >= " + c.arg(q.Num))
	case store.SearchBlobID:
		c.raw("m.blob_id = " + c.arg(q.Num))
	case store.SearchLarger:
		c.raw("b.size > " + c.arg(q.Num))
	case store.SearchSmaller:
		c.raw("b.size < " + c.arg(q.Num))
	case store.SearchBefore, store.SearchOn, store.SearchSince:
		c.internalDay(q.Op, q.Date)
	case store.SearchSentBefore, store.SearchSentOn, store.SearchSentSince:
		c.sentDay(q.Op, q.Date)
	case store.SearchSubject, store.SearchFrom, store.SearchTo, store.SearchCc, store.SearchBcc:
		col := map[store.SearchOp]string{store.SearchSubject: "subject_lc", store.SearchFrom: "from_lc",
			store.SearchTo: "to_lc", store.SearchCc: "cc_lc", store.SearchBcc: "bcc_lc"}[q.Op]
		c.raw("position(" + c.arg([]byte(strings.ToLower(q.Text))) + "::bytea IN i." + col + ") > 0")
	case store.SearchBody, store.SearchText:
		needle := strings.ToLower(q.Text)
		if needle == "" {
			c.raw("true")
			return nil
		}
		c.needText = true
		pat := c.arg(likeContains(needle))
		if q.Op == store.SearchBody {
			c.raw("t.body LIKE " + pat)
		} else {
			c.raw("(t.body LIKE " + pat + " OR t.header LIKE " + pat + ")")
		}
	case store.SearchHeader:
		key := [2]string{strings.ToLower(q.Field), q.Text}
		if _, ok := c.headers[key]; !ok {
			ids, err := headerMatches(ctx, tx, mailboxID, q.Field, q.Text)
			if err != nil {
				return err
			}
			c.headers[key] = c.arg(ids)
		}
		c.raw("m.blob_id = ANY(" + c.headers[key] + ")")
	default:
		return fmt.Errorf("unknown search operation %d: %w", q.Op, store.ErrInvalid)
	}
	return nil
}

// headerMatches returns the blobs of the mailbox with a top-level field
// named field whose decoded value contains needle ("" : the field is
// there): the searchable header's "name: …value…" narrows them, the
// stored header decides.
func headerMatches(ctx context.Context, tx querier, mailboxID int64, field, needle string) ([]int64, error) {
	pat := "%" + store.LikeEscaper.Replace(strings.ToLower(field)+": ") + "%" + store.LikeEscaper.Replace(strings.ToLower(needle)) + "%"
	rows, _ := tx.Query(ctx, `SELECT DISTINCT m.blob_id, i.header FROM mail m JOIN blob_text t ON t.blob_id = m.blob_id
		JOIN blob_meta i ON i.blob_id = m.blob_id WHERE m.mailbox_id = $1 AND t.header LIKE $2`,
		pgx.QueryExecModeExec, mailboxID, pat)
	ids := []int64{}
	var id int64
	var header []byte
	_, err := pgx.ForEachRow(rows, []any{&id, &header}, func() error {
		if store.HeaderFieldContains(header, nil, field, needle) {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search header %q: %w", field, err)
	}
	return ids, nil
}

// uidRangesInline is the largest UID set written as BETWEEN terms;
// larger finite sets (a saved SEARCHRES result, RFC 5182) are an array.
const uidRangesInline = 64

// maxUIDList bounds the UIDs expanded into an array.
const maxUIDList = 1 << 20

// uids writes a UID set test; an empty set matches nothing.
func (c *searchSQL) uids(set store.UIDSet) {
	if len(set) == 0 {
		c.raw("false")
		return
	}
	ss := spans(set)
	if len(ss) > uidRangesInline {
		var n int64
		for _, s := range ss {
			n += s.hi - s.lo + 1
		}
		if n <= maxUIDList {
			list := make([]int64, 0, n)
			for _, s := range ss {
				for u := s.lo; u <= s.hi; u++ {
					list = append(list, u)
				}
			}
			c.raw("m.uid = ANY(" + c.arg(list) + ")")
			return
		}
	}
	// Numbers are written literally: they are integers.
	c.raw("(")
	for i, s := range ss {
		if i > 0 {
			c.raw(" OR ")
		}
		c.raw(fmt.Sprintf("m.uid BETWEEN %d AND %d", s.lo, s.hi))
	}
	c.raw(")")
}

// localDay returns the first second of the calendar day of d (time and
// zone ignored) in the server's zone, and of the next day: internal dates
// carry no zone in the store, so they are compared as local time.
func localDay(d time.Time) (start, next int64) {
	y, m, dd := d.Date()
	return time.Date(y, m, dd, 0, 0, 0, 0, time.Local).Unix(), time.Date(y, m, dd+1, 0, 0, 0, 0, time.Local).Unix()
}

// internalDay compares the internal date's day with d (BEFORE, ON, SINCE:
// "disregarding time and timezone").
func (c *searchSQL) internalDay(op store.SearchOp, d time.Time) {
	start, next := localDay(d)
	switch op {
	case store.SearchBefore, store.SearchSentBefore:
		c.raw("m.internal_date < " + c.arg(start))
	case store.SearchOn, store.SearchSentOn:
		c.raw("(m.internal_date >= " + c.arg(start) + " AND m.internal_date < " + c.arg(next) + ")")
	default:
		c.raw("m.internal_date >= " + c.arg(start))
	}
}

// sentDayExpr is the day number (days since 1970-01-01) of the Date:
// field in its own zone, floor((date + offset) / 86400), right for dates
// before 1970 too.
const sentDayExpr = "(((i.date + i.date_offset) - (((i.date + i.date_offset) % 86400) + 86400) % 86400) / 86400)"

// sentDay compares the day of the Date: field, in the zone it was written
// in, with d (SENTBEFORE, SENTON, SENTSINCE); a message without a usable
// Date: uses its internal date.
func (c *searchSQL) sentDay(op store.SearchOp, d time.Time) {
	y, m, dd := d.Date()
	want := time.Date(y, m, dd, 0, 0, 0, 0, time.UTC).Unix() / 86400
	cmp := map[store.SearchOp]string{store.SearchSentBefore: "<", store.SearchSentOn: "=", store.SearchSentSince: ">="}[op]
	c.raw("(CASE WHEN i.date IS NULL THEN ")
	c.internalDay(op, d)
	c.raw(" ELSE " + sentDayExpr + " " + cmp + " " + c.arg(want) + " END)")
}
