package oci

import specs "github.com/opencontainers/runtime-spec/specs-go"

// Linux values, spelled out so the profile is the same whatever OS builds
// it (golang.org/x/sys/unix has no CLONE_NEWUSER off Linux, and ENOSYS
// differs on Darwin).
const (
	errnoEPERM  = 1
	errnoENOSYS = 38
)

// cloneNewUser is CLONE_NEWUSER: unprivileged user namespaces expose large
// amounts of kernel code otherwise reachable only with CAP_SYS_ADMIN.
const cloneNewUser = 0x10000000

// deniedSyscalls fail with EPERM.
var deniedSyscalls = []struct {
	comment string
	names   []string
}{
	{"mounts and the new mount API", []string{
		"mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount",
		"fspick", "move_mount", "open_tree", "mount_setattr"}},
	{"kernel modules", []string{
		"init_module", "finit_module", "delete_module", "create_module",
		"get_kernel_syms", "query_module"}},
	{"replacing or stopping the kernel", []string{"kexec_load", "kexec_file_load", "reboot"}},
	{"kernel attack surface reachable without privileges", []string{"bpf", "perf_event_open", "userfaultfd"}},
	{"kernel keyrings are not namespaced", []string{"keyctl", "add_key", "request_key"}},
	{"host-global state", []string{
		"swapon", "swapoff", "syslog", "acct", "settimeofday", "stime", "clock_settime",
		"clock_adjtime", "adjtimex", "quotactl", "quotactl_fd", "nfsservctl", "lookup_dcookie"}},
	{"file handles bypass mount and path checks", []string{"open_by_handle_at", "name_to_handle_at"}},
	{"raw I/O port access", []string{"iopl", "ioperm"}},
	{"joining other namespaces", []string{"setns"}},
	{"obsolete or legacy interfaces", []string{"vm86", "vm86old", "uselib"}},
	{"cross-process memory access (see package doc on ptrace)", []string{"process_vm_readv", "process_vm_writev", "kcmp"}},
}

// enosysSyscalls fail with ENOSYS so callers take their fallback path.
var enosysSyscalls = []struct {
	comment string
	names   []string
}{
	{"clone3 hides its flags from seccomp: make libc fall back to clone", []string{"clone3"}},
	{"io_uring: the largest recent source of kernel privilege escalations", []string{
		"io_uring_setup", "io_uring_enter", "io_uring_register"}},
}

// allowedPersonalities are the personality values a normal program sets:
// PER_LINUX, PER_LINUX32, UNAME26 and its combination. Everything else is
// denied, including the query value 0xffffffff, which seccomp cannot tell
// apart from "set every flag" without an AND of two conditions on one
// argument (see personalityRules); gdb then warns that it cannot disable
// ASLR and carries on, as it does under Docker.
var allowedPersonalities = []uint64{0x0, 0x8, 0x20000, 0x20008}

// highPersonality is the first bit above every allowed value (bit 18,
// ADDR_NO_RANDOMIZE); any value at or above it is denied.
const highPersonality = 1 << 18

// seccompArchitectures lists the ABIs a process on goarch can use; every
// ABI must be filtered or a process could switch to an unfiltered one
// (int 0x80 on x86_64).
func seccompArchitectures(goarch string) []specs.Arch {
	switch goarch {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	case "386":
		return []specs.Arch{specs.ArchX86}
	default:
		return nil // the runtime's native architecture
	}
}

// defaultSeccomp returns Platinum's default seccomp profile for goarch.
//
// It is a deny list (defaultAction SCMP_ACT_ALLOW, listed syscalls fail
// with EPERM), not Docker's allow list, on purpose:
//
//   - Sandboxes run arbitrary, fast-moving user workloads (new runtimes,
//     language toolchains, browsers). An allow list fails closed on every
//     syscall the kernel adds after the profile was written (clone3,
//     faccessat2, openat2, futex_waitv, cachestat, …) and shows up as
//     baffling ENOSYS/EPERM bugs in user code; a deny list only has to track
//     the small, slow-growing set of syscalls that reach kernel-global state.
//   - The profile is not the only wall: the container has no CAP_SYS_ADMIN,
//     CAP_SYS_MODULE, CAP_SYS_TIME, … (see config.go), so most listed
//     syscalls already fail on capability checks. Seccomp here removes
//     kernel attack surface (code reachable without privileges: bpf,
//     userfaultfd, io_uring, keyrings, user namespaces) and is
//     defense-in-depth for the rest.
//   - The same profile must work under runsc, where the syscall surface is
//     gVisor's, not the host kernel's.
//
// ptrace is allowed: with a PID namespace a process can only trace its own
// sandbox's processes, with the usual same-uid / no-CAP_SYS_PTRACE rules,
// and since Linux 4.8 seccomp re-checks a syscall after a tracer changes
// it, so ptrace can no longer bypass the filter. Debuggers and strace are
// normal in dev sandboxes. process_vm_readv/writev and kcmp stay denied:
// they reach the same memory as ptrace but no tool we ship needs them;
// they are the first candidates to open if a profiler does.
//
// clone3 returns ENOSYS (not EPERM) so libc falls back to clone, whose flags
// seccomp can inspect (clone3 passes them in memory); io_uring returns
// ENOSYS so runtimes such as libuv fall back to thread pools. personality
// is limited to the usual values (see personalityRules).
//
// Under gVisor (gvisor true) the ENOSYS rules are left out: runsc's
// --oci-seccomp ignores errnoRet and answers every SCMP_ACT_ERRNO with
// EPERM, and glibc does not fall back from a clone3 that fails with EPERM,
// so every pthread_create (node, Python threads, …) failed. gVisor's own
// kernel answers clone3 and io_uring itself, and a flag clone3 hides
// (CLONE_NEWUSER) only reaches gVisor's kernel, not the host's.
func defaultSeccomp(goarch string, gvisor bool) *specs.LinuxSeccomp {
	eperm, enosys := uint(errnoEPERM), uint(errnoENOSYS)
	s := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArchitectures(goarch),
	}
	for _, d := range deniedSyscalls {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: d.names, Action: specs.ActErrno, ErrnoRet: &eperm})
	}
	for _, d := range enosysSyscalls {
		if gvisor {
			break
		}
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: d.names, Action: specs.ActErrno, ErrnoRet: &enosys})
	}
	userns := []specs.LinuxSeccompArg{{Index: 0, Value: cloneNewUser, ValueTwo: cloneNewUser, Op: specs.OpMaskedEqual}}
	s.Syscalls = append(s.Syscalls,
		// No user namespaces (CLONE_NEWUSER in flags).
		specs.LinuxSyscall{Names: []string{"unshare", "clone"}, Action: specs.ActErrno, ErrnoRet: &eperm, Args: userns},
	)
	s.Syscalls = append(s.Syscalls, personalityRules(eperm)...)
	return s
}

// personalityRules deny every personality outside allowedPersonalities.
// runc turns several conditions on one argument into separate (OR'ed)
// rules and cannot express "not in set", so the complement is spelled as
// one single-condition rule per bit the allowed values never set (bits
// 0–16 except 3), plus "≥ 1<<18" for every higher bit. One condition per
// rule means every runtime reads the rules the same way.
func personalityRules(eperm uint) []specs.LinuxSyscall {
	var allowedBits uint64
	for _, v := range allowedPersonalities {
		allowedBits |= v
	}
	var rules []specs.LinuxSyscall
	for bit := uint64(1); bit < highPersonality; bit <<= 1 {
		if bit&allowedBits != 0 {
			continue
		}
		rules = append(rules, specs.LinuxSyscall{Names: []string{"personality"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: bit, ValueTwo: bit, Op: specs.OpMaskedEqual}}})
	}
	// personality: only PER_LINUX, PER_LINUX32 and UNAME26 (no
	// ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, …).
	rules = append(rules, specs.LinuxSyscall{Names: []string{"personality"}, Action: specs.ActErrno, ErrnoRet: &eperm,
		Args: []specs.LinuxSeccompArg{{Index: 0, Value: highPersonality, Op: specs.OpGreaterEqual}}})
	return rules
}
