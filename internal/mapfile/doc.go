// Package mapfile maps a file into memory, for the two places that must
// read a whole message of up to 50 MiB without holding it on the heap:
// the SMTP server's delivery of a spooled message, and the word indexer
// reading a stored message file. Mapped pages are the file's (page
// cache): the kernel reads in only the pages that are touched and takes
// them back when memory is short, and Unmap releases them at once. Where
// mmap is not available (not unix), Map reads the file.
package mapfile
