//go:build !linux

package metrics

// Without /proc the process metrics that need it read 0; pimail runs on
// Linux, this only keeps other systems building (development on macOS).

func residentBytes() int64 { return 0 }
func openFDs() int         { return 0 }
func cpuSeconds() float64  { return 0 }

// PeakRSS is unknown without /proc.
func PeakRSS() int64 { return 0 }
