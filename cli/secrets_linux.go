package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// prSetDumpable is prctl's PR_SET_DUMPABLE (linux/prctl.h).
const prSetDumpable = 4

// hideProcessSecrets makes this process non-dumpable and overwrites
// secrets in its command line and environment as the kernel shows them.
//
// argv must be os.Args as the runtime set it (its strings still in the
// memory the kernel placed them in): Go copies the environment at start
// but not argv, so the caller must have copied every argument it still
// uses, since their bytes change. secrets are the values to hide: an
// argument equal to one, or "--name=" followed by one, has the value
// overwritten with 'x'. In the environment block the values of every
// BACKLOG_* variable and of every variable whose value is one of secrets
// are overwritten; os.Getenv and os.Environ keep the real values.
//
// Non-dumpable (prctl PR_SET_DUMPABLE 0): /proc/<pid>/environ, mem, maps,
// fd and the like of this process become root's and refuse other
// processes of the same uid (ptrace access), the handlers it runs
// included; processes with CAP_SYS_PTRACE (root) still read them.
// /proc/<pid>/cmdline stays readable by everyone, hence the overwrite.
// Core dumps are off. Handlers themselves are dumpable again once they
// exec.
func hideProcessSecrets(argv []string, secrets []string) error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	args, environ, err := startBlocks(argv)
	if err != nil {
		return err
	}
	maskArgs(args, secrets)
	maskEnviron(environ, secrets)
	return nil
}

// startBlocks returns the memory of the argument and environment strings
// the kernel placed at exec (what /proc/self/cmdline and environ read),
// after checking that argv's strings are those very bytes.
func startBlocks(argv []string) (args, environ []byte, err error) {
	if len(argv) == 0 || len(argv[0]) == 0 {
		return nil, nil, errors.New("no command line to hide secrets in")
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return nil, nil, err
	}
	// After "(comm) ", field 3 (state) onwards; arg_start, arg_end,
	// env_start and env_end are fields 48 to 51 (proc(5)).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, nil, errors.New("/proc/self/stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 51-2 {
		return nil, nil, errors.New("/proc/self/stat: no arg_start…env_end fields (Linux before 3.5)")
	}
	var addr [4]uintptr
	for j := range addr {
		v, err := strconv.ParseUint(f[48-3+j], 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("/proc/self/stat field %d: %w", 48+j, err)
		}
		addr[j] = uintptr(v)
	}
	argStart, argEnd, envStart, envEnd := addr[0], addr[1], addr[2], addr[3]
	p := unsafe.Pointer(unsafe.StringData(argv[0]))
	if uintptr(p) != argStart || argEnd < argStart || envStart < argEnd || envEnd < envStart {
		return nil, nil, errors.New("the command line is not where the kernel put it")
	}
	args = unsafe.Slice((*byte)(p), argEnd-argStart)
	if string(args) != strings.Join(argv, "\x00")+"\x00" {
		return nil, nil, errors.New("the command line was changed since exec")
	}
	environ = unsafe.Slice((*byte)(unsafe.Add(p, envStart-argStart)), envEnd-envStart)
	return args, environ, nil
}

// maskArgs overwrites, in the NUL-separated block b, the value of every
// argument that is one of secrets or "-…=" followed by one.
func maskArgs(b []byte, secrets []string) {
	eachString(b, func(s []byte) {
		for _, v := range secrets {
			switch {
			case v == "":
			case string(s) == v:
				fill(s)
			case len(s) > len(v) && s[0] == '-' && string(s[len(s)-len(v)-1:]) == "="+v:
				fill(s[len(s)-len(v):])
			default:
				continue
			}
			return
		}
	})
}

// maskEnviron overwrites, in the NUL-separated KEY=VALUE block b, the
// value of every BACKLOG_* variable and of every variable whose value is
// one of secrets.
func maskEnviron(b []byte, secrets []string) {
	eachString(b, func(s []byte) {
		k, v, ok := strings.Cut(string(s), "=")
		if !ok || v == "" {
			return
		}
		hide := strings.HasPrefix(k, "BACKLOG_")
		for _, sv := range secrets {
			hide = hide || sv == v
		}
		if hide {
			fill(s[len(k)+1:])
		}
	})
}

// eachString calls fn with each NUL-terminated string of b, in place.
func eachString(b []byte, fn func([]byte)) {
	for len(b) > 0 {
		n := 0
		for n < len(b) && b[n] != 0 {
			n++
		}
		fn(b[:n:n])
		if n == len(b) {
			return
		}
		b = b[n+1:]
	}
}

func fill(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
