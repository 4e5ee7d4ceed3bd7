package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"

	"pimail/internal/store"
)

// maxSearchDepth bounds the nesting of a search program.
const maxSearchDepth = 100

// uidRangesInline is the largest UID set written as BETWEEN terms; larger
// sets (a saved SEARCHRES result, RFC 5182) become an IN list.
const uidRangesInline = 64

// maxUIDList bounds the UIDs expanded into an IN list.
const maxUIDList = 1 << 20

func init() {
	// pimail_contains(hay, needle): the case-insensitive substring match
	// of RFC 9051 §6.4.4 (SQLite's LIKE folds ASCII only).
	sqlite.MustRegisterDeterministicScalarFunction("pimail_contains", 2,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			return store.ContainsFold(sqlText(args[0]), sqlText(args[1])), nil
		})
}

func sqlText(v driver.Value) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

// Search answers a search program (RFC 9051 §6.4.4) with one SQL query over
// the mailbox's rows: flags, dates, sizes and header fields from columns,
// TEXT, BODY and HEADER from blob sets computed first with the full-text
// index (search_text.go).
func (s *Store) Search(ctx context.Context, mailboxID int64, q store.SearchQuery) (store.SearchResult, error) {
	var res store.SearchResult
	tx, mb, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return res, err
	}
	defer tx.Rollback()
	p := &searchPlan{s: s, tx: tx, mailboxID: mailboxID, texts: map[textKey]*textCrit{}}
	if err := p.collectText(q, 0); err != nil {
		return res, err
	}
	if err := p.resolveText(ctx); err != nil {
		return res, err
	}
	var c sqlBuilder
	if err := p.compile(&c, q, 0); err != nil {
		return res, err
	}
	from := "mail m"
	if t := p.drivingText(q, 0); t != nil && uint64(len(t.match))*8 < uint64(mb.UIDNext) {
		// Few matches: find their rows through the index on blob_id
		// instead of reading every row of the mailbox (0.4 µs each).
		from = "mail m INDEXED BY mail_blob"
	}
	if c.needBlob {
		from += " JOIN blobs b ON b.id = m.blob_id"
	}
	if c.needAddrs {
		from += " LEFT JOIN blob_addrs a ON a.blob_id = m.blob_id"
	}
	// One row: the pairs as text, since the driver costs about 2 µs for
	// every row it returns (see fetch_agg.go) and a common word's search
	// returns thousands.
	args := append([]any{mailboxID}, c.args...)
	var pairs string
	err = tx.QueryRowContext(ctx, "SELECT coalesce(group_concat(m.uid || ' ' || m.modseq, ' '), '') FROM "+from+
		" WHERE m.mailbox_id = ? AND ("+c.sb.String()+")", args...).Scan(&pairs)
	if err != nil {
		return res, fmt.Errorf("sqlite store: search mailbox %d: %w", mailboxID, err)
	}
	if res, err = parsePairs(pairs); err != nil {
		return res, fmt.Errorf("sqlite store: search mailbox %d: %w", mailboxID, err)
	}
	return res, nil
}

// parsePairs reads "uid modseq uid modseq ..." into a result in UID order.
func parsePairs(s string) (store.SearchResult, error) {
	var res store.SearchResult
	f := strings.Fields(s)
	if len(f) == 0 {
		return res, nil
	}
	if len(f)%2 != 0 {
		return res, fmt.Errorf("odd search result %q", s)
	}
	type pair struct {
		uid uint32
		ms  uint64
	}
	ps := make([]pair, len(f)/2)
	for i := range ps {
		u, err1 := strconv.ParseUint(f[2*i], 10, 32)
		m, err2 := strconv.ParseUint(f[2*i+1], 10, 64)
		if err1 != nil || err2 != nil {
			return res, fmt.Errorf("bad search result pair %q %q", f[2*i], f[2*i+1])
		}
		ps[i] = pair{uint32(u), m}
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(a.uid, b.uid) })
	res.UIDs = make([]uint32, len(ps))
	res.ModSeqs = make([]uint64, len(ps))
	for i, p := range ps {
		res.UIDs[i], res.ModSeqs[i] = p.uid, p.ms
	}
	return res, nil
}

// drivingText returns the text criterion with the fewest matches among
// those that every result must satisfy (q itself or the operands of
// top-level ANDs), once resolved; nil if there is none.
func (p *searchPlan) drivingText(q store.SearchQuery, depth int) *textCrit {
	switch q.Op {
	case store.SearchHeader, store.SearchBody, store.SearchText:
		if t := p.texts[keyOf(q)]; t != nil && !t.all && len(t.match) > 0 {
			return t
		}
	case store.SearchAnd:
		if depth > maxSearchDepth {
			return nil
		}
		var best *textCrit
		for _, ch := range q.Children {
			if t := p.drivingText(ch, depth+1); t != nil && (best == nil || len(t.match) < len(best.match)) {
				best = t
			}
		}
		return best
	}
	return nil
}

// searchPlan is the state of one Search.
type searchPlan struct {
	s         *Store
	tx        *sql.Tx
	mailboxID int64
	texts     map[textKey]*textCrit
}

// sqlBuilder accumulates a WHERE expression and its arguments.
type sqlBuilder struct {
	sb        strings.Builder
	args      []any
	needBlob  bool // the expression uses columns of blobs (b.)
	needAddrs bool // the expression uses columns of blob_addrs (a.)
}

func (c *sqlBuilder) raw(s string) { c.sb.WriteString(s) }

func (c *sqlBuilder) arg(s string, a ...any) {
	c.sb.WriteString(s)
	c.args = append(c.args, a...)
}

// compile writes the SQL for q.
func (p *searchPlan) compile(c *sqlBuilder, q store.SearchQuery, depth int) error {
	if depth > maxSearchDepth {
		return fmt.Errorf("search program nested too deeply: %w", store.ErrInvalid)
	}
	switch q.Op {
	case store.SearchAll:
		c.raw("1")
	case store.SearchAnd, store.SearchOr:
		if len(q.Children) == 0 {
			c.raw(map[bool]string{true: "1", false: "0"}[q.Op == store.SearchAnd])
			return nil
		}
		sep := map[bool]string{true: " AND ", false: " OR "}[q.Op == store.SearchAnd]
		c.raw("(")
		for i, ch := range q.Children {
			if i > 0 {
				c.raw(sep)
			}
			if err := p.compile(c, ch, depth+1); err != nil {
				return err
			}
		}
		c.raw(")")
	case store.SearchNot:
		if len(q.Children) != 1 {
			return fmt.Errorf("search NOT needs one operand: %w", store.ErrInvalid)
		}
		c.raw("NOT (")
		if err := p.compile(c, q.Children[0], depth+1); err != nil {
			return err
		}
		c.raw(")")
	case store.SearchUIDs:
		compileUIDs(c, q.UIDs)
	case store.SearchFlag:
		c.raw(fmt.Sprintf("(m.flags & %d) = %d", q.Flags&store.AllFlags, q.Flags&store.AllFlags))
	case store.SearchKeyword:
		c.arg("instr(' ' || lower(m.keywords) || ' ', ?) > 0", " "+strings.ToLower(q.Keyword)+" ")
	case store.SearchModSeq:
		c.arg("m.modseq >= ?", q.Num)
	case store.SearchBlobID:
		c.arg("m.blob_id = ?", q.Num)
	case store.SearchLarger:
		c.needBlob = true
		c.arg("b.size > ?", q.Num)
	case store.SearchSmaller:
		c.needBlob = true
		c.arg("b.size < ?", q.Num)
	case store.SearchBefore, store.SearchOn, store.SearchSince:
		compileInternalDay(c, q.Op, q.Date)
	case store.SearchSentBefore, store.SearchSentOn, store.SearchSentSince:
		compileSentDay(c, q.Op, q.Date)
	case store.SearchSubject, store.SearchFrom, store.SearchTo, store.SearchCc, store.SearchBcc:
		// The lower-cased copy in blob_addrs (schema version 5) lets
		// SQLite's instr decide ContainsFold without calling into Go; a
		// blob without that row (none are expected) is tested on blobs.
		c.needAddrs = true
		col := map[store.SearchOp]string{store.SearchSubject: "subject", store.SearchFrom: "from_addr",
			store.SearchTo: "to_addr", store.SearchCc: "cc_addr", store.SearchBcc: "bcc_addr"}[q.Op]
		c.arg("(CASE WHEN a.blob_id IS NOT NULL THEN instr(a."+col+", ?) > 0 ELSE pimail_contains((SELECT "+col+
			" FROM blobs WHERE id = m.blob_id), ?) END)", strings.ToLower(q.Text), q.Text)
	case store.SearchHeader, store.SearchBody, store.SearchText:
		t := p.texts[keyOf(q)]
		switch {
		case t == nil || t.all:
			c.raw("1")
		case len(t.match) == 0:
			c.raw("0")
		default:
			ids, err := json.Marshal(t.matchList())
			if err != nil {
				return fmt.Errorf("encode blob set: %w", err)
			}
			c.arg("m.blob_id IN (SELECT value FROM json_each(?))", string(ids))
		}
	default:
		return fmt.Errorf("unknown search operation %d: %w", q.Op, store.ErrInvalid)
	}
	return nil
}

// compileUIDs writes a UID set test; an empty set matches nothing.
func compileUIDs(c *sqlBuilder, set store.UIDSet) {
	if len(set) == 0 {
		c.raw("0")
		return
	}
	if len(set) > uidRangesInline {
		var n int64
		finite := true
		for _, r := range set {
			if r.Stop == 0 || r.Stop < r.Start {
				finite = false
				break
			}
			n += int64(r.Stop-r.Start) + 1
		}
		if finite && n <= maxUIDList {
			var b strings.Builder
			b.WriteByte('[')
			for i, r := range set {
				for u := uint64(r.Start); u <= uint64(r.Stop); u++ {
					if i > 0 || u > uint64(r.Start) {
						b.WriteByte(',')
					}
					b.WriteString(strconv.FormatUint(u, 10))
				}
			}
			b.WriteByte(']')
			c.arg("m.uid IN (SELECT value FROM json_each(?))", b.String())
			return
		}
	}
	// Numbers are written literally: they are integers, and a long set
	// would otherwise exceed SQLite's limit on bound parameters.
	c.raw("(")
	for i, r := range set {
		if i > 0 {
			c.raw(" OR ")
		}
		switch {
		case r.Stop == 0:
			c.raw(fmt.Sprintf("m.uid >= %d", r.Start))
		case r.Start == r.Stop:
			c.raw(fmt.Sprintf("m.uid = %d", r.Start))
		default:
			lo, hi := min(r.Start, r.Stop), max(r.Start, r.Stop)
			c.raw(fmt.Sprintf("m.uid BETWEEN %d AND %d", lo, hi))
		}
	}
	c.raw(")")
}

// localDay returns the first second of the calendar day of d (its year,
// month and day; time and zone ignored) in the server's zone, and of the
// next day. Internal dates carry no zone in the store, so they are
// compared as local time.
func localDay(d time.Time) (start, next int64) {
	y, m, dd := d.Date()
	return time.Date(y, m, dd, 0, 0, 0, 0, time.Local).Unix(), time.Date(y, m, dd+1, 0, 0, 0, 0, time.Local).Unix()
}

// compileInternalDay compares the internal date's day with d (RFC 9051
// §6.4.4 BEFORE, ON, SINCE: "disregarding time and timezone").
func compileInternalDay(c *sqlBuilder, op store.SearchOp, d time.Time) {
	start, next := localDay(d)
	switch op {
	case store.SearchBefore, store.SearchSentBefore:
		c.arg("m.internal_date < ?", start)
	case store.SearchOn, store.SearchSentOn:
		c.arg("(m.internal_date >= ? AND m.internal_date < ?)", start, next)
	default:
		c.arg("m.internal_date >= ?", start)
	}
}

// sentDayExpr is the day number (days since 1970-01-01) of the Date: field
// in its own zone: floor((date + offset) / 86400), written so that it is
// right for dates before 1970 too.
const sentDayExpr = "(((b.date + b.date_offset) - (((b.date + b.date_offset) % 86400) + 86400) % 86400) / 86400)"

// compileSentDay compares the day of the Date: field, in the zone it was
// written in, with d (SENTBEFORE, SENTON, SENTSINCE); a message without a
// usable Date: uses its internal date.
func compileSentDay(c *sqlBuilder, op store.SearchOp, d time.Time) {
	c.needBlob = true
	y, m, dd := d.Date()
	want := time.Date(y, m, dd, 0, 0, 0, 0, time.UTC).Unix() / 86400
	cmp := map[store.SearchOp]string{store.SearchSentBefore: "<", store.SearchSentOn: "=", store.SearchSentSince: ">="}[op]
	c.raw("(CASE WHEN b.date IS NULL THEN ")
	compileInternalDay(c, op, d)
	c.arg(" ELSE "+sentDayExpr+" "+cmp+" ? END)", want)
}
