package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// compare reads JSON lines labelled SERVER/WORKLOAD from the files and
// prints, per workload, the median of each metric over repeated runs for
// every server, and the ratio of the first server to the second
// (-a/-b name them; default pimail and postfix).
func compare(args []string, w io.Writer) error {
	a, b := "pimail", "postfix"
	var files []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-a", "-b":
			if i+1 >= len(args) {
				return fmt.Errorf("%s needs a value", args[i])
			}
			if args[i] == "-a" {
				a = args[i+1]
			} else {
				b = args[i+1]
			}
			i++
		default:
			files = append(files, args[i])
		}
	}
	runs := map[string]map[string][]map[string]float64{} // workload -> server -> runs
	var order []string
	for _, f := range files {
		if err := readRuns(f, runs, &order); err != nil {
			return err
		}
	}
	metrics := []struct{ key, name string }{
		{"accepted_per_s", "accepted msgs/s"},
		{"delivered_per_s", "delivered msgs/s"},
		{"e2e_p50_ms", "e2e p50 ms"},
		{"e2e_p99_ms", "e2e p99 ms"},
		{"smtp_p50_ms", "smtp p50 ms"},
		{"drain_s", "drain s"},
		{"cpu_ms_per_good", "server CPU ms/good msg"},
		{"written_per_good", "bytes written/good msg"},
		{"peak_pss_mib", "peak memory (PSS sum) MiB"},
		{"errors_total", "errors"},
	}
	fmt.Fprintf(w, "| workload | metric | %s | %s | %s/%s |\n|---|---|---|---|---|\n", a, b, a, b)
	for _, wl := range order {
		for _, m := range metrics {
			va, na := median(runs[wl][a], m.key)
			vb, nb := median(runs[wl][b], m.key)
			if na == 0 && nb == 0 || va == 0 && vb == 0 {
				continue
			}
			ratio := "–"
			if na > 0 && nb > 0 && vb != 0 {
				ratio = fmt.Sprintf("%.2f", va/vb)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", wl, m.name, cell(va, na), cell(vb, nb), ratio)
		}
	}
	return nil
}

func cell(v float64, n int) string {
	if n == 0 {
		return "–"
	}
	s := fmt.Sprintf("%.4g", v)
	if n > 1 {
		s += fmt.Sprintf(" (med. of %d)", n)
	}
	return s
}

func readRuns(name string, runs map[string]map[string][]map[string]float64, order *[]string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal(line, &raw); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		label, _ := raw["label"].(string)
		server, wl, ok := strings.Cut(label, "/")
		if !ok {
			continue
		}
		nums := map[string]float64{}
		for k, v := range raw {
			if x, ok := v.(float64); ok {
				nums[k] = x
			}
		}
		nums["errors_total"] = nums["rejected"] + nums["broken"] + nums["conn_errors"] + nums["bounce_missed"] + nums["unseen"]
		if runs[wl] == nil {
			runs[wl] = map[string][]map[string]float64{}
			*order = append(*order, wl)
		}
		runs[wl][server] = append(runs[wl][server], nums)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func median(rs []map[string]float64, key string) (float64, int) {
	var v []float64
	for _, r := range rs {
		v = append(v, r[key])
	}
	if len(v) == 0 {
		return 0, 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], len(v)
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, len(v)
}
