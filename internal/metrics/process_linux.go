package metrics

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Linux exposes the process state in /proc/self (proc(5)).

// pageSize converts /proc/self/statm pages to bytes.
var pageSize = int64(os.Getpagesize())

// clockTicks is USER_HZ, the unit of utime and stime in /proc/self/stat;
// it is 100 on every Linux architecture pimail builds for.
const clockTicks = 100

// residentBytes is the second field of /proc/self/statm (resident pages).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n * pageSize
}

// openFDs counts the entries of /proc/self/fd.
func openFDs() int {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	return len(names) - 1 // the descriptor of the directory itself
}

// cpuSeconds is utime + stime (fields 14 and 15 of /proc/self/stat). The
// command name, field 2, may hold spaces, so fields are counted after its
// closing parenthesis.
func cpuSeconds() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// After ")": state is field 3, so utime (14) is f[11], stime (15) f[12].
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / clockTicks
}

// PeakRSS is the highest resident memory of the process so far (VmHWM of
// /proc/self/status, which the kernel updates lazily, so at least the
// current resident size), in bytes; 0 when unknown.
func PeakRSS() int64 { return max(hwm(), residentBytes()) }

func hwm() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v) // "1234 kB"
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n << 10
		}
	}
	return 0
}
