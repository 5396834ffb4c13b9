package benchmarks

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// CPU is the CPU time spent while a variant ran: by this process, by the
// PostgreSQL server's processes (every one of them: on a shared server
// the others' work counts too), and by the whole machine, beside the
// time its cores had. It is zero where /proc is not there.
type CPU struct {
	Self, Postgres time.Duration
	Busy, Cores    time.Duration // the machine's busy time, and all its cores' time
}

// Add returns c and d summed.
func (c CPU) Add(d CPU) CPU {
	return CPU{Self: c.Self + d.Self, Postgres: c.Postgres + d.Postgres, Busy: c.Busy + d.Busy, Cores: c.Cores + d.Cores}
}

// sub returns what was spent from then to c.
func (c CPU) sub(then CPU) CPU {
	return CPU{Self: c.Self - then.Self, Postgres: c.Postgres - then.Postgres, Busy: c.Busy - then.Busy, Cores: c.Cores - then.Cores}
}

// sampleCPU reads the CPU times spent so far.
func sampleCPU() CPU {
	var c CPU
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c.Postgres = postgresCPU()
	c.Busy, c.Cores = machineCPU()
	return c
}

// postgresCPU sums the user and system time of the processes named
// postgres.
func postgresCPU() time.Duration {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range paths {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open || string(stat[open+1:end]) != "postgres" {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if len(f) > 12 { // utime and stime are fields 14 and 15 of the line
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * clockTick
}

// machineCPU reads the machine's busy and total CPU time from /proc/stat.
func machineCPU() (busy, total time.Duration) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0
	}
	var all, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest time is counted in user time already
			break
		}
		all += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(all-idle) * clockTick, time.Duration(all) * clockTick
}
