package imapwire

import (
	"errors"
	"strconv"
	"strings"
)

// FetchAtt is one parsed fetch attribute (RFC 9051 §6.4.5).
type FetchAtt struct {
	Name    string // FLAGS, UID, ENVELOPE, BODY, BODYSTRUCTURE, BODY[], BINARY[], BINARY.SIZE[], RFC822, ...
	Peek    bool   // BODY.PEEK / BINARY.PEEK
	Section *Section
	Partial *Partial
}

// Section is a body section specification: part path and text.
type Section struct {
	Part   []int    // "1.2.3"; empty means the whole message
	Text   string   // "", HEADER, HEADER.FIELDS, HEADER.FIELDS.NOT, TEXT, MIME
	Fields []string // for HEADER.FIELDS (.NOT), as given
	Raw    string   // the section text between "[" and "]", for the response
}

// Partial is "<origin.count>"; Count 0 with HasCount false means to the end.
type Partial struct {
	Origin   int64
	Count    int64
	HasCount bool
}

var errFetchAtt = errors.New("invalid fetch attribute")

// ParseFetchAtts parses the fetch attribute argument: a macro (ALL, FAST,
// FULL), one attribute or a parenthesised list (RFC 9051 §6.4.5).
func ParseFetchAtts(a Arg) ([]FetchAtt, error) {
	var items []Arg
	switch a.Kind {
	case KindAtom:
		switch upper(a.Str) {
		case "ALL":
			return macro("FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE"), nil
		case "FAST":
			return macro("FLAGS", "INTERNALDATE", "RFC822.SIZE"), nil
		case "FULL":
			return macro("FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODY"), nil
		}
		items = []Arg{a}
	case KindList:
		items = a.List
	default:
		return nil, errFetchAtt
	}
	if len(items) == 0 {
		return nil, errFetchAtt
	}
	atts := make([]FetchAtt, 0, len(items))
	for _, it := range items {
		if it.Kind != KindAtom {
			return nil, errFetchAtt
		}
		fa, err := ParseFetchAtt(it.Str)
		if err != nil {
			return nil, err
		}
		atts = append(atts, fa)
	}
	return atts, nil
}

func macro(names ...string) []FetchAtt {
	atts := make([]FetchAtt, len(names))
	for i, n := range names {
		atts[i] = FetchAtt{Name: n}
	}
	return atts
}

// ParseFetchAtt parses one fetch attribute such as
// BODY.PEEK[1.2.HEADER.FIELDS (From To)]<0.100>.
func ParseFetchAtt(s string) (FetchAtt, error) {
	name, rest, hasSection := strings.Cut(s, "[")
	name = upper(name)
	if !hasSection {
		switch name {
		case "ENVELOPE", "FLAGS", "INTERNALDATE", "RFC822", "RFC822.HEADER", "RFC822.SIZE",
			"RFC822.TEXT", "BODY", "BODYSTRUCTURE", "UID", "MODSEQ",
			"EMAILID", "THREADID": // RFC 8474 §5
			return FetchAtt{Name: name}, nil
		}
		return FetchAtt{}, errFetchAtt
	}
	fa := FetchAtt{}
	binary := false
	switch name {
	case "BODY":
		fa.Name = "BODY[]"
	case "BODY.PEEK":
		fa.Name, fa.Peek = "BODY[]", true
	case "BINARY":
		fa.Name, binary = "BINARY[]", true
	case "BINARY.PEEK":
		fa.Name, fa.Peek, binary = "BINARY[]", true, true
	case "BINARY.SIZE":
		fa.Name, fa.Peek, binary = "BINARY.SIZE[]", true, true
	default:
		return FetchAtt{}, errFetchAtt
	}
	end := strings.LastIndexByte(rest, ']')
	if end < 0 {
		return FetchAtt{}, errFetchAtt
	}
	sec, err := ParseSection(rest[:end])
	if err != nil {
		return FetchAtt{}, err
	}
	if binary && sec.Text != "" {
		return FetchAtt{}, errFetchAtt // RFC 3516 §4.2: section-binary is a part path only
	}
	fa.Section = &sec
	tail := rest[end+1:]
	if tail != "" {
		if fa.Name == "BINARY.SIZE[]" {
			return FetchAtt{}, errFetchAtt
		}
		p, err := parsePartial(tail)
		if err != nil {
			return FetchAtt{}, err
		}
		fa.Partial = &p
	}
	return fa, nil
}

// ParseSection parses the text between "[" and "]" (RFC 9051 §9 section-spec).
func ParseSection(s string) (Section, error) {
	sec := Section{Raw: s}
	rest := s
	for rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n <= 0 || i > 6 {
			return Section{}, errFetchAtt
		}
		sec.Part = append(sec.Part, n)
		if len(sec.Part) > 64 {
			return Section{}, errFetchAtt
		}
		rest = rest[i:]
		if rest == "" {
			return sec, nil
		}
		if rest[0] != '.' {
			return Section{}, errFetchAtt
		}
		rest = rest[1:]
		if rest == "" {
			return Section{}, errFetchAtt
		}
	}
	if rest == "" {
		return sec, nil
	}
	word, list, hasList := strings.Cut(rest, " ")
	word = upper(word)
	switch word {
	case "HEADER", "TEXT":
		if hasList {
			return Section{}, errFetchAtt
		}
	case "MIME":
		if hasList || len(sec.Part) == 0 {
			return Section{}, errFetchAtt
		}
	case "HEADER.FIELDS", "HEADER.FIELDS.NOT":
		if !hasList || len(list) < 2 || list[0] != '(' || list[len(list)-1] != ')' {
			return Section{}, errFetchAtt
		}
		fields, err := parseFieldNames(list[1 : len(list)-1])
		if err != nil {
			return Section{}, err
		}
		sec.Fields = fields
	default:
		return Section{}, errFetchAtt
	}
	sec.Text = word
	return sec, nil
}

// parseFieldNames splits "From To "X-Y"" into header field names (astrings,
// literals not supported inside sections).
func parseFieldNames(s string) ([]string, error) {
	var out []string
	for s != "" {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, errFetchAtt
			}
			out = append(out, s[1:1+end])
			s = s[end+2:]
			continue
		}
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			i = len(s)
		}
		name := s[:i]
		for j := 0; j < len(name); j++ {
			c := name[j]
			if c <= ' ' || c >= 0x7f || c == ':' || c == '(' || c == ')' {
				return nil, errFetchAtt
			}
		}
		out = append(out, name)
		s = s[i:]
	}
	if len(out) == 0 {
		return nil, errFetchAtt
	}
	return out, nil
}

func parsePartial(s string) (Partial, error) {
	if len(s) < 3 || s[0] != '<' || s[len(s)-1] != '>' {
		return Partial{}, errFetchAtt
	}
	body := s[1 : len(s)-1]
	a, b, hasCount := strings.Cut(body, ".")
	origin, err := parseNumber64(a)
	if err != nil {
		return Partial{}, err
	}
	p := Partial{Origin: origin}
	if hasCount {
		n, err := parseNumber64(b)
		if err != nil || n == 0 {
			return Partial{}, errFetchAtt // nz-number
		}
		p.Count, p.HasCount = n, true
	}
	return p, nil
}

func parseNumber64(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, errFetchAtt
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errFetchAtt
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// ParseNumber parses an IMAP number (RFC 9051 §9: 1*DIGIT, fits in 32 bits).
func ParseNumber(s string) (uint32, error) {
	if s == "" || len(s) > 10 {
		return 0, errors.New("invalid number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("invalid number")
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, errors.New("invalid number")
	}
	return uint32(n), nil
}

// ParseNumber64 parses a number64 (RFC 9051 §9), e.g. a MODSEQ.
func ParseNumber64(s string) (uint64, error) {
	n, err := parseNumber64(s)
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}
