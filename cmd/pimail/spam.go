package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"pimail/internal/spam"
	"pimail/internal/store"
)

func init() {
	register("spam", "train and test the spam filter", cmdSpam)
}

func cmdSpam(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(os.Stderr, "usage: pimail spam VERB ...\n\nverbs:\n"+
			"  spam train [--data DIR] [--account ADDRESS | --base] [--untrain] --spam SOURCE --ham SOURCE\n"+
			"  spam check [--data DIR] [--account ADDRESS] FILE\n\n"+
			"SOURCE is a directory of messages, an mbox file, a single message, or a list file\n"+
			"of \"path<TAB>label\" lines (paths relative to the list; only lines of the matching\n"+
			"label, or without one, are used), such as the corpus' train.txt.\n")
		if len(args) == 0 {
			return usagef("missing verb")
		}
		return nil
	}
	switch args[0] {
	case "train":
		return spamTrain(args[1:])
	case "check":
		return spamCheck(args[1:])
	}
	return usagef("unknown verb %q", args[0])
}

// accountID resolves --account to its ID (BaseAccount when empty).
func accountID(st store.DirectoryReader, address string) (int64, error) {
	if address == "" {
		return spam.BaseAccount, nil
	}
	acc, err := st.Account(context.Background(), strings.ToLower(address))
	if err != nil {
		return 0, fmt.Errorf("account %s: %w", address, err)
	}
	return acc.ID, nil
}

func spamTrain(args []string) error {
	fset := newFlags("spam train", "--spam SOURCE --ham SOURCE", "Train the base model (default) or an account's model; the server picks the change up within 30 s.")
	df := addDataFlags(fset)
	account := fset.String("account", "", "train this account's model instead of the base model")
	base := fset.Bool("base", false, "train the shared base model (the default)")
	untrain := fset.Bool("untrain", false, "remove the messages from the model instead of adding them")
	spamSrc := fset.String("spam", "", "spam messages: directory, mbox, message or list file")
	hamSrc := fset.String("ham", "", "ham messages: directory, mbox, message or list file")
	pos, err := parse(fset, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %v", pos)
	}
	if *base && *account != "" {
		return usagef("--base and --account exclude each other")
	}
	if *spamSrc == "" && *hamSrc == "" {
		return usagef("give --spam and/or --ham")
	}
	loc, err := df.loc()
	if err != nil {
		return err
	}
	st, err := openAdminStore(loc)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := accountID(st, *account)
	if err != nil {
		return err
	}
	f, err := spam.New(spam.Config{Store: st, ReloadInterval: -1, Logger: quietLogger()})
	if err != nil {
		return err
	}
	for _, job := range []struct {
		src, label string
		isSpam     bool
	}{{*spamSrc, "spam", true}, {*hamSrc, "ham", false}} {
		if job.src == "" {
			continue
		}
		n := 0
		err := eachMessage(job.src, job.label, func(raw []byte) error {
			n++
			switch {
			case *untrain:
				return f.Untrain(id, raw, job.isSpam)
			case job.isSpam:
				return f.TrainSpam(id, raw)
			default:
				return f.TrainHam(id, raw)
			}
		})
		if err != nil {
			return err
		}
		verb := "trained"
		if *untrain {
			verb = "untrained"
		}
		fmt.Printf("%s %d %s messages\n", verb, n, job.label)
	}
	if err := f.Save(); err != nil {
		if errors.Is(err, store.ErrModified) {
			return fmt.Errorf("%w; nothing was saved: run the command again", err)
		}
		return err
	}
	m, err := f.Model(id)
	if err != nil {
		return err
	}
	s, h := m.Counts()
	fmt.Printf("model now holds %d spam and %d ham messages, %d tokens\n", s, h, m.Size())
	return nil
}

func spamCheck(args []string) error {
	fset := newFlags("spam check", "FILE", "Score one message as the server would and print the score and reasons.")
	df := addDataFlags(fset)
	account := fset.String("account", "", "score for this account (base model plus its own)")
	pos, err := parse(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one message file")
	}
	raw, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	loc, err := df.loc()
	if err != nil {
		return err
	}
	st, err := openAdminStore(loc)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := accountID(st, *account)
	if err != nil {
		return err
	}
	f, err := spam.New(spam.Config{Store: st, ReloadInterval: -1, Logger: quietLogger()})
	if err != nil {
		return err
	}
	res, err := f.Check(context.Background(), spam.Input{Raw: raw, Accounts: []int64{id}})
	if err != nil {
		return err
	}
	v := res.Message
	fmt.Printf("score %.2f  action %s  (junk at %.1f, reject at %.1f)\n", v.Score, v.Action, f.Config().JunkThreshold, f.Config().RejectThreshold)
	if v.Bayes >= 0 {
		fmt.Printf("bayes probability %.4f\n", v.Bayes)
	} else {
		fmt.Printf("bayes: not trained enough (needs %d spam and %d ham)\n", spam.MinTrained, spam.MinTrained)
	}
	for _, h := range v.Hits {
		fmt.Printf("  %6.2f  %s\n", h.Score, h.Name)
	}
	if len(v.Clues) > 0 {
		fmt.Println("strongest tokens:")
		for _, c := range v.Clues {
			fmt.Printf("  %.3f  %q\n", c.Prob, c.Token)
		}
	}
	return nil
}

// maxTrainMessage skips larger files: the tokenizer reads at most a few
// hundred KB anyway.
const maxTrainMessage = 32 << 20

// eachMessage calls fn for every message of a source; see cmdSpam's usage
// for the forms a source may take.
func eachMessage(src, label string, fn func([]byte) error) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("training source: %w", err)
	}
	if fi.IsDir() {
		return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			return readOne(p, fn)
		})
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("training source: %w", err)
	}
	switch {
	case bytes.HasPrefix(data, []byte("From ")):
		return eachMbox(data, fn)
	case isListFile(src, data):
		return eachListed(src, data, label, fn)
	}
	return fn(data)
}

func readOne(path string, fn func([]byte) error) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if fi.Size() > maxTrainMessage {
		fmt.Fprintf(os.Stderr, "skipped %s: larger than %d bytes\n", path, maxTrainMessage)
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return fn(raw)
}

// isListFile: the first line names an existing file relative to the list.
func isListFile(src string, data []byte) bool {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	p, _, _ := strings.Cut(strings.TrimSpace(string(line)), "\t")
	if p == "" || strings.Contains(p, ": ") {
		return false
	}
	fi, err := os.Stat(filepath.Join(filepath.Dir(src), p))
	return err == nil && fi.Mode().IsRegular()
}

func eachListed(src string, data []byte, label string, fn func([]byte) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p, l, hasLabel := strings.Cut(line, "\t")
		if hasLabel && strings.TrimSpace(l) != label {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(src), p)
		}
		if err := readOne(p, fn); err != nil {
			return err
		}
	}
	return sc.Err()
}

// eachMbox splits an mbox (mboxrd, RFC 4155): messages start at lines
// beginning "From " and body lines ">From ", ">>From "… lose one '>'.
func eachMbox(data []byte, fn func([]byte) error) error {
	var cur []byte
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		msg := cur
		cur = nil
		return fn(msg)
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line = data[:i+1]
		}
		data = data[len(line):]
		if bytes.HasPrefix(line, []byte("From ")) {
			if err := flush(); err != nil {
				return err
			}
			cur = []byte{}
			continue
		}
		if t := bytes.TrimLeft(line, ">"); len(t) < len(line) && bytes.HasPrefix(t, []byte("From ")) {
			line = line[1:]
		}
		if cur != nil && len(cur) < maxTrainMessage {
			cur = append(cur, line...)
		}
	}
	return flush()
}
