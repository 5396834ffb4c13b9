package benchmarks

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTick is the unit of the CPU times in /proc: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// ApplicationName is the application_name of the benchmark's PostgreSQL
// connections, by which [CPU] tells the server processes that serve them.
const ApplicationName = "koto-bench"

// CPU is the CPU time spent while a variant ran: by this process, by the
// PostgreSQL backends serving its connections (those with
// ApplicationName), and by the whole machine, beside the time its cores
// had. It is zero where /proc is not there.
type CPU struct {
	Self, Postgres time.Duration
	Busy, Cores    time.Duration // the machine's busy time, and all its cores' time
}

// Add returns c and d summed.
func (c CPU) Add(d CPU) CPU {
	return CPU{Self: c.Self + d.Self, Postgres: c.Postgres + d.Postgres, Busy: c.Busy + d.Busy, Cores: c.Cores + d.Cores}
}

// cpuSample is the CPU times spent so far, with each PostgreSQL process's.
type cpuSample struct {
	self, busy, cores time.Duration
	postgres          map[int]time.Duration // by pid
}

func sampleCPU() cpuSample {
	s := cpuSample{postgres: postgresCPU()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	s.busy, s.cores = machineCPU()
	return s
}

// since returns what was spent from then to s, PostgreSQL's by the
// backends of pids.
func (s cpuSample) since(then cpuSample, pids []int) CPU {
	c := CPU{Self: s.self - then.self, Busy: s.busy - then.busy, Cores: s.cores - then.cores}
	for _, pid := range pids {
		c.Postgres += s.postgres[pid] - then.postgres[pid]
	}
	return c
}

// benchBackends returns the pids of the backends whose application_name
// is ApplicationName.
func benchBackends(ctx context.Context, pool *pgxpool.Pool) []int {
	rows, err := pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", ApplicationName)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// postgresCPU reads the user and system time of each process named
// postgres.
func postgresCPU() map[int]time.Duration {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := map[int]time.Duration{}
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
			pid, _ := strconv.Atoi(string(bytes.TrimSpace(stat[:open])))
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			out[pid] = time.Duration(u+s) * clockTick
		}
	}
	return out
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
	for i, v := range f[1:min(len(f), 9)] { // guest time is counted in user time already
		n, _ := strconv.ParseInt(v, 10, 64)
		all += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(all-idle) * clockTick, time.Duration(all) * clockTick
}
