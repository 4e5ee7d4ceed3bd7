package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"pimail/internal/store"
)

// ftsVariants are the FTS5 table layouts compared by -compare-fts.
var ftsVariants = []struct{ name, opts string }{
	{"trigram detail=full", "tokenize='trigram', detail=full"},
	{"trigram detail=none", "tokenize='trigram', detail=none"},
	{"unicode61 detail=full", "tokenize='unicode61 remove_diacritics 0'"},
}

// compareFTS indexes the searchable text of msgs in each FTS5 variant
// (contentless, 200 rows per transaction) and prints the time and the index
// size relative to the mail size.
func compareFTS(msgs [][]byte) error {
	var mailBytes, textBytes int64
	texts := make([]store.SearchableText, len(msgs))
	start := time.Now()
	for i, m := range msgs {
		mailBytes += int64(len(m))
		texts[i] = store.ExtractSearchableText(m, nil)
		textBytes += int64(len(texts[i].Header) + len(texts[i].Body))
	}
	fmt.Printf("messages %d, mail %.1f MB, searchable text %.1f MB, extraction %.3f ms/msg\n",
		len(msgs), mb(mailBytes), mb(textBytes), float64(time.Since(start).Microseconds())/1000/float64(len(msgs)))
	dir, err := os.MkdirTemp("", "ftscompare")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	for i, v := range ftsVariants {
		path := filepath.Join(dir, fmt.Sprintf("v%d.db", i))
		db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		db.SetMaxOpenConns(1)
		if _, err := db.Exec("CREATE VIRTUAL TABLE fts USING fts5(hdr, body, content='', contentless_delete=1, " + v.opts + ")"); err != nil {
			db.Close()
			return fmt.Errorf("create %s: %w", v.name, err)
		}
		t0 := time.Now()
		for lo := 0; lo < len(texts); lo += 200 {
			tx, err := db.Begin()
			if err != nil {
				db.Close()
				return fmt.Errorf("begin: %w", err)
			}
			for j := lo; j < min(lo+200, len(texts)); j++ {
				if _, err := tx.Exec("INSERT INTO fts (rowid, hdr, body) VALUES (?, ?, ?)", j+1, texts[j].Header, texts[j].Body); err != nil {
					tx.Rollback()
					db.Close()
					return fmt.Errorf("insert: %w", err)
				}
			}
			if err := tx.Commit(); err != nil {
				db.Close()
				return fmt.Errorf("commit: %w", err)
			}
		}
		el := time.Since(t0)
		if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			db.Close()
			return fmt.Errorf("checkpoint: %w", err)
		}
		db.Close()
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("stat index: %w", err)
		}
		fmt.Printf("%-24s insert %.3f ms/msg, index %.1f MB = %.0f%% of mail\n", v.name,
			float64(el.Microseconds())/1000/float64(len(texts)), mb(fi.Size()), 100*float64(fi.Size())/float64(mailBytes))
	}
	return nil
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }
