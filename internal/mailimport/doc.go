// Package mailimport moves existing mail into a pimail account: from mbox
// files, from Maildir++ directories and from a remote IMAP server. Every
// message is stored with store.Append, which returns only after the message
// is on disk; sources are read as streams, so memory stays bounded by the
// largest single message (and, for IMAP, by one fetch batch).
//
// # mbox
//
// Files are read as mboxrd (the default) or mboxo (RFC 4155 and the
// "mbox" family described in qmail's mbox(5)): a message starts with a
// "From " line at the beginning of the file or after an empty line, and the
// empty line before the next "From " line is the separator, not part of the
// message. Quoted body lines are unquoted:
//
//   - mboxrd: a line matching ^>+From  loses one '>' (reversible quoting);
//   - mboxo: only ^>From  becomes "From " (">>From " is left alone).
//
// mboxcl/mboxcl2 (Content-Length framing) is not supported; such files
// usually also quote "From " lines and then read correctly as mboxo.
//
// Flags come from the status headers written by mail clients, which are
// removed from the stored message because they are mailbox metadata, not
// part of the mail (Dovecot does the same):
//
//	Status:            R → \Seen   (O, "old", has no IMAP equivalent)
//	X-Status:          A → \Answered, F → \Flagged, T → \Draft, D → \Deleted
//	X-Keywords:        space or comma separated IMAP keywords (Dovecot, mutt)
//	X-Mozilla-Status:  hex bits 0x1 \Seen, 0x2 \Answered, 0x4 \Flagged,
//	                   0x8 \Deleted, 0x1000 $Forwarded (Thunderbird)
//	X-Mozilla-Status2, X-Mozilla-Keys (keywords), X-UID, X-IMAP, X-IMAPbase:
//	                   removed; X-Mozilla-Keys adds its keywords
//
// The internal date is the date of the From_ line (asctime, taken as UTC,
// optionally followed by a numeric zone), else the Date: header, else now.
//
// # Maildir
//
// A Maildir++ directory (cur/ new/ tmp/ at the top for INBOX, and folders
// ".Sub.Folder" beside them for "Sub/Folder"; folder names in modified
// UTF-7 as Courier and Dovecot write them) is imported folder by folder.
// Flags come from the ":2," info suffix of the file name (D \Draft, F
// \Flagged, P $Forwarded, R \Answered, S \Seen, T \Deleted; the lower case
// letters a–z are keywords listed in the folder's dovecot-keywords file).
// The internal date is the file's modification time (the received date of
// Dovecot and Courier), or the delivery time at the start of the file name
// when the mtime is unusable. Messages are imported in delivery-time order;
// the subscriptions file marks folders subscribed.
//
// # IMAP
//
// Every selectable folder of the remote account is copied with flags,
// keywords and internal dates. Virtual folders (\All, \Flagged) are
// skipped, because their messages are in other folders. Folders with a
// special use (\Sent, \Drafts, \Trash, \Junk, \Archive) go to the local
// folder with the same special use.
//
// Re-running an import continues where the last run stopped and never
// copies a message twice: a journal in the data directory
// (DIR/import/imap-<hash>.journal, one per account, server and user)
// records for each remote folder its UIDVALIDITY and the highest UID
// imported, one fsynced line after each stored message. The key is the
// source UID, which does not depend on message headers. If a crash falls
// between storing a message and writing its journal line, the next run
// compares the first remaining source message with the newest message of
// the local folder and skips it when the bytes are equal. When a folder's
// UIDVALIDITY changed, its UIDs mean nothing any more: the folder is
// skipped with an error, unless the caller asks to import it again.
//
// Messages are fetched in batches of UIDs (Batch, default 200) and
// streamed one at a time from the connection into the store. Several
// folders (Connections, default 4) are copied at once, each over its own
// connection, so that one folder's fsyncs overlap with another's; all the
// folders that go into one local mailbox are copied by one worker, in UID
// order. Memory stays bounded by one message per connection.
package mailimport
