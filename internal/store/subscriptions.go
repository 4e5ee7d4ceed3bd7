package store

// Subscriptions (MailboxReader.Subscriptions, MailboxWriter.SetSubscribed)
// are the mailbox names an account subscribed to (RFC 3501 §6.3.6, RFC
// 9051 §6.3.7): a list of names kept apart from the mailboxes, so that a
// name may be subscribed before its mailbox exists and stays subscribed
// after the mailbox is deleted (LSUB and LIST-EXTENDED then show it, with
// \NonExistent). Creating or deleting a mailbox changes no subscription;
// renaming one moves the subscriptions of it and its children along (as
// Dovecot does). The special-use mailboxes an account is created with
// (DefaultMailboxes) are subscribed from the start. Mailbox.Subscribed
// says whether a mailbox's name is subscribed.
