"""Platinum's code-interpreter server, run inside a sandbox by pt-agent.

It manages contexts (one kernel or REPL process per context, a default
context per language), runs code in them and streams what the code
produces as NDJSON. Two wire formats share one engine:

* /execute, /contexts, ... : E2B code-interpreter's format, so the
  unmodified @e2b/code-interpreter SDK works through Platinum's E2B port
  routing;
* /v1/execute, /v1/contexts, ... : Platinum's own format, which ptd serves
  as POST /v1/sandboxes/{id}/code (docs/code-interpreter.md).

Python contexts are real IPython kernels (ipykernel, spoken to over
ZeroMQ's wire protocol by KernelClient, on plain sockets: Zmtp); JavaScript
contexts are a node process evaluating cells in one `vm` context (repl.js);
TypeScript contexts are the same with each cell's types stripped first
(Debian's typescript, transpile only: types are not checked); bash
contexts are one persistent bash process. The server uses only the
standard library; the kernels use ipykernel and pyzmq, which the template
installs from Debian.
"""

import base64
import codecs
import collections
import datetime
import hashlib
import hmac
import itertools
import json
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
ENV_FILE = os.environ.get("PT_CODE_ENV_FILE", "/run/platinum/env.json")
MAX_CODE = 1 << 20  # bytes; ptd documents the same limit (413 code_too_large)
LANGUAGES = {"python": "python", "py": "python", "python3": "python",
             "javascript": "javascript", "js": "javascript", "node": "javascript",
             "typescript": "typescript", "ts": "typescript",
             "bash": "bash", "sh": "bash", "shell": "bash"}
INTERRUPT_GRACE = 3.0  # seconds a cell gets to stop after SIGINT before its process is replaced
INTERRUPT_RESEND = 0.5  # SIGINT is sent again this often while a cell has not stopped
# Past the grace period a process that is runnable but got less than
# STARVED_CPU of CPU since is starved by a busy host, not ignoring SIGINT:
# the wait goes on, for at most INTERRUPT_STARVED seconds more.
INTERRUPT_STARVED = 30.0
STARVED_CPU = 0.1  # seconds
# A cell's client is asked whether it is still there (a select system
# call) at most this often, not on every kernel message: a system call is
# dear under gVisor (docs/code-interpreter.md, "On gVisor"), and a quiet
# cell's wait wakes this often anyway.
ALIVE_EVERY = 0.05  # seconds
# A cell's answer is written when something must go: its response head
# waits for the first event, and an event for the next one, each at most
# HOLD seconds, so a short cell's head, result and end leave in one write
# (one TCP segment). Under gVisor each segment out of the sandbox is a
# system call and a pass through its network stack, and its peer's wake-up
# (docs/code-interpreter.md, "On gVisor"). A client that stops a cell by
# its X-Execution-Id gets the ID at most HOLD seconds later.
HOLD = 0.02  # seconds


class Ids:
    """Unique IDs without a system call each: a random prefix read once
    per process, then a counter. uuid4 reads the kernel's random source on
    every call, a system call, and a steady cell made two (its execution ID
    and its request's message ID)."""

    def __init__(self):
        self.prefix = os.urandom(6).hex()
        self.count = itertools.count(1)  # next() is atomic under the GIL

    def next(self):
        """24 hex digits, as uuid4().hex[:24] had."""
        return "%s%012x" % (self.prefix, next(self.count))


IDS = Ids()

# The kernel we launch: ipykernel, minus what no client here uses, which
# is most of its start (CPU measured in the template): debugpy (1.5-3 s;
# nothing attaches a debugger), jedi (completion requests are never sent)
# and IPython's terminal UI (prompt_toolkit), which `import IPython` pulls
# in for IPython.embed alone: a stand-in loads it when embed is called.
# psutil (ipykernel's usage and child-process requests) and urllib.request
# (IPython's %load of a URL, with http.client and email) are imported at
# start and used only on request: ~25 ms of the kernel's ~250 ms of
# imports on one host core; stand-ins load them on first use.
# After the imports the stand-ins go, so a cell imports the real modules.
# History lives in memory (no sqlite file, no writer thread); tracebacks
# lose their ANSI colours.
# ipykernel flushes stdout and stderr six times a cell (before a result,
# before the reply, after the handler), each a round trip to its IOPub
# thread even with nothing written: ~1 ms of a 1+1 cell on one core
# (docs/code-interpreter.md, "Performance"). A flush with nothing
# buffered returns at once: what was written is already queued on the
# IOPub thread, which sends in order, so output still comes before the
# result and the idle status after everything; only the execute_reply
# (shell channel) may now leave before the IOPub thread has sent the
# cell's last messages, and this server reads the reply after idle.
# Each message or flush the kernel hands its IOPub thread is queued and
# then wakes the thread (a ZeroMQ message on an inproc pipe, and the
# thread's read of it: several system calls each); a 1+1 cell queues
# several before the thread runs. Now only the first of those wakes it,
# and the thread runs the whole queue in order until it is empty. No
# lock (a signal handler that prints could run inside it on the main
# thread): the thread clears the "a wake-up is on its way" flag and then
# finds the queue empty before it stops, and schedule appends before it
# reads the flag, so under the GIL an item is either seen by the drain
# or sends a wake-up; an exception (SIGINT in schedule, an error in a
# queued call) clears the flag, so the next item wakes the thread.
# ipykernel 6.17 (the template's) starts each shell message by handing
# the control thread a flush of its queue and getting a future back from
# it (two cross-thread wake-ups, an asyncio future), but dispatch_shell
# awaits only the coroutine, never that future, so the shell message
# never waited for it: skipping the round trip changes no order. The
# control thread still handles control messages as they come.
# os.getpid is cached: jupyter_client's Session (each message's ID and
# send), ipykernel's OutStream (its master-process check on each write
# and flush), logging (each record) and IPython's compiler (each cell's
# file name) call it about 20 times a cell, each a system call, and a
# system call costs 40-180 us under gVisor here (docs/code-interpreter.md,
# "On gVisor"). The cache is refreshed in a forked child before any other
# after-fork hook runs (registered first; Python runs them in order), so
# os.fork, multiprocessing and pty see the child's own pid; subprocess
# runs no Python in its child. Only a fork that skips Python's fork hooks
# (a C extension calling fork(2) itself) would see the parent's pid.
KERNEL_PY = """import importlib, os, sys, types
_pid = [os.getpid()]
_real_getpid = os.getpid
def getpid():
    \"\"\"Return the current process id.\"\"\"
    return _pid[0]
os.register_at_fork(after_in_child=lambda: _pid.__setitem__(0, _real_getpid()))
os.getpid = getpid
del getpid
sys.modules["debugpy"] = None
sys.modules["jedi"] = None
_embed = types.ModuleType("IPython.terminal.embed")
def _real_embed():
    if sys.modules.get("IPython.terminal.embed") is _embed:
        del sys.modules["IPython.terminal.embed"]
    return importlib.import_module("IPython.terminal.embed")
def _embed_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_real_embed(), name)
def embed(**kwargs):  # IPython's embed(): its terminal UI loads on this first call
    return _real_embed().embed(**kwargs)
_embed.embed = embed
del embed
_embed.__getattr__ = _embed_getattr
sys.modules["IPython.terminal.embed"] = _embed
class _Later(types.ModuleType):  # the real module, imported on first use
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(self.__name__), name)
def _later(name, *names):  # names: imported from it at start, so callables that load it when called
    m = _Later(name)
    for n in names:
        def f(*a, _n=n, **kw):
            return getattr(importlib.import_module(name), _n)(*a, **kw)
        setattr(m, n, f)
    sys.modules[name] = m
_later("psutil", "Process")
_later("urllib.request", "Request", "urlopen")
from ipykernel import kernelapp, iostream
for _m in ("debugpy", "jedi", "psutil", "urllib.request"):
    if sys.modules.get(_m, 0) is None or isinstance(sys.modules.get(_m), _Later):
        del sys.modules[_m]
_flush = iostream.OutStream.flush
def flush(self):  # nothing buffered: nothing to send, no round trip to the IOPub thread
    try:
        idle = self._buffer.tell() == 0 and not self._flush_pending and not self._subprocess_flush_pending
    except AttributeError:  # another ipykernel: its own flush
        idle = False
    if not idle:
        _flush(self)
iostream.OutStream.flush = flush
del flush
from ipykernel import kernelbase
if kernelbase.Kernel.__module__ == "ipykernel.kernelbase" and __import__("ipykernel").__version__.startswith("6.17."):
    async def _flush_control_queue(self):  # 6.17's dispatch_shell never awaits the flush: skip its round trip
        return None
    kernelbase.Kernel._flush_control_queue = _flush_control_queue
    del _flush_control_queue
_IOPub = iostream.IOPubThread
if all(hasattr(_IOPub, a) for a in ("_handle_event", "_event_pipe", "schedule")):
    def schedule(self, f):  # one wake-up for all that is queued before the IOPub thread runs
        if not self.thread.is_alive():
            f()
            return
        self._events.append(f)
        if getattr(self, "_pt_woken", False):
            return
        try:
            self._pt_woken = True  # a wake-up is on its way
            self._event_pipe.send(b"")
        except BaseException:  # KeyboardInterrupt (the server's SIGINT) included: never left set without a wake-up
            self._pt_woken = False
            raise
    def _handle_event(self, msg):  # everything queued, in order, until the queue is empty
        try:
            while True:
                while self._events:
                    self._events.popleft()()
                self._pt_woken = False
                if not self._events:
                    return
                self._pt_woken = True
        except BaseException:  # as before, what is left waits for the next wake-up, which must come
            self._pt_woken = False
            raise
    _IOPub.schedule, _IOPub._handle_event = schedule, _handle_event
    del schedule, _handle_event
import signal as _signal
from IPython.core import interactiveshell as _ishell
_in_code = [False]
def _pt_sigint(signum, frame):  # KeyboardInterrupt only while a cell's code runs
    __tracebackhide__ = True
    if _in_code[0]:
        raise KeyboardInterrupt
_run_code = _ishell.InteractiveShell.run_code
async def run_code(self, *a, **kw):  # the cell's code, whose KeyboardInterrupt IPython reports
    _in_code[0] = True
    try:
        return await _run_code(self, *a, **kw)
    finally:
        _in_code[0] = False
_ishell.InteractiveShell.run_code = run_code
del run_code
def _sigint_hook(self):  # before and after each request, for a cell that changed it
    try:
        _signal.signal(_signal.SIGINT, _pt_sigint)
    except ValueError:  # not the main thread
        pass
kernelbase.Kernel.pre_handler_hook = kernelbase.Kernel.post_handler_hook = _sigint_hook
del _sigint_hook
_init_kernel = kernelapp.IPKernelApp.init_kernel
def init_kernel(self):  # the server's helpers, defined before the first request instead of by one
    _init_kernel(self)
    exec("import os as __pt_os\\n"
         "def __pt_env(set_, unset):\\n"
         "    for k in unset: __pt_os.environ.pop(k, None)\\n"
         "    __pt_os.environ.update(set_)\\n", self.kernel.shell.user_ns)
kernelapp.IPKernelApp.init_kernel = init_kernel
del init_kernel
_initialize = kernelapp.IPKernelApp.initialize
def initialize(self, argv=None):  # then tell the server its sockets listen
    _initialize(self, argv)
    import os
    fd = int(os.environ.pop("PT_KERNEL_READY_FD", "-1"))
    if fd >= 0:
        os.write(fd, b"1")
        os.close(fd)
kernelapp.IPKernelApp.initialize = initialize
del initialize
kernelapp.launch_new_instance()
"""
# _execute_sleep: ipykernel sleeps 0.5 ms after each cell's flushes,
# before the execute_reply, to let its IOPub thread send first; this
# server waits for the idle status (sent after the reply, on IOPub, in
# order after the cell's output) and does not need it.
KERNEL_ARGS = ["--InteractiveShell.colors=NoColor", "--HistoryManager.hist_file=:memory:",
               "--IPythonKernel._execute_sleep=0"]


def install_kernel():
    """Writes the kernel's launcher next to this file; returns its path."""
    d = os.path.join(HERE, "jupyter")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "kernel.py")
    with open(path, "w") as f:
        f.write(KERNEL_PY)
    return path


KERNEL_FILE = os.path.join(HERE, "jupyter", "kernel.py")


# MIME types → E2B's Result field names (anything else goes in extra).
E2B_KEYS = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
            "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
            "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
            "application/javascript": "javascript"}


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class HTTPError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class EnvFile:
    """The sandbox's current environment as pt-agent last wrote it, read
    again only when the file may have changed: every cell asks for it, and
    a read and parse per cell is time on the steady-state round trip
    (docs/code-interpreter.md, "Performance"). pt-agent replaces the file
    (a new file renamed over it), so its inode, size or times change; since
    file times are coarse (a write a moment after the last read can keep
    them), a file changed less than RACY seconds before it was read is read
    again every time, as git treats racily clean files."""

    RACY = 2.0

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.stamp = None
        self.read_at = 0
        self.env = {}

    def get(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return {}
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self.lock:
            if stamp != self.stamp or max(st.st_mtime_ns, st.st_ctime_ns) > self.read_at - int(self.RACY * 1e9):
                self.read_at = time.time_ns()
                self.env, self.stamp = self.read(), stamp
            return dict(self.env)

    def read(self):
        try:
            with open(self.path) as f:
                env = json.load(f)
            return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
        except (OSError, ValueError):
            return {}


SANDBOX_ENV = EnvFile(ENV_FILE)


def sandbox_env():
    """The sandbox's current environment as pt-agent last wrote it."""
    return SANDBOX_ENV.get()


class Cell:
    """One execution: where its events go and how it may be stopped."""

    def __init__(self, sink, timeout, alive, ctx):
        self.id = "exec_" + IDS.next()
        self.ctx = ctx
        self.started_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.sink = sink          # callable(event dict)
        self.deadline = time.monotonic() + timeout if timeout else None
        self.alive = alive        # callable() -> False once the client is gone
        self.status = "ok"
        self.execution_count = None
        # Set by POST /contexts/{id}/interrupt or DELETE /executions/{id}.
        self.interrupt = False
        self.done = threading.Event()  # set once the cell's events are all sent
        self.state = "waiting"  # "running" once its context runs it
        # When alive() was last asked (monotonic). Not at once: a client
        # that leaves in a cell's first ALIVE_EVERY seconds is seen then.
        self.asked_at = time.monotonic()
        self.gone = False  # alive() said no: the client went away
        self.flush = lambda: None  # sends what sink() holds back (see HOLD)
        self.due = None  # when what sink() holds must go (monotonic), None: nothing held

    def wait_time(self, most):
        """How long a context may wait for its process's next event: at
        most most seconds, less when held output is due sooner."""
        if self.due is None:
            return most
        return max(0.0, min(most, self.due - time.monotonic()))

    def tick(self):
        """Sends held output that is due (see HOLD)."""
        if self.due is not None and time.monotonic() >= self.due:
            self.flush()

    def view(self):
        return {"id": self.id, "context_id": self.ctx.id, "language": self.ctx.language,
                "state": self.state, "started_at": self.started_at}

    def stopped(self):
        """Why the cell must stop now: "interrupted", "timeout",
        "disconnected" or None."""
        if self.interrupt:
            return "interrupted"
        if self.deadline is not None and time.monotonic() > self.deadline:
            return "timeout"
        if not self.client_there():
            return "disconnected"
        return None

    def client_there(self):
        """False once the client has gone; alive() is asked at most every
        ALIVE_EVERY seconds."""
        now = time.monotonic()
        if not self.gone and (self.asked_at is None or now - self.asked_at >= ALIVE_EVERY):
            self.asked_at = now
            self.gone = not self.alive()
        return not self.gone


class Executions:
    """The cells accepted and not yet ended, by ID, so that one can be
    stopped by DELETE /executions/{id} from another connection."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_id = {}

    def add(self, cell):
        with self.lock:
            self.by_id[cell.id] = cell

    def discard(self, cell):
        with self.lock:
            self.by_id.pop(cell.id, None)
        cell.done.set()

    def list(self):
        with self.lock:
            return [c.view() for c in self.by_id.values()]

    def stop(self, eid):
        """Interrupts execution eid and waits until it has ended (its
        process replaced, at worst, after INTERRUPT_GRACE)."""
        with self.lock:
            cell = self.by_id.get(eid)
        if cell is None:
            raise HTTPError(404, "not_found", "execution %s not found (it ended, or never ran here)" % eid)
        cell.interrupt = True
        cell.done.wait(INTERRUPT_GRACE + 30)


EXECUTIONS = Executions()


class Stopper:
    """Stops a cell once it must stop: SIGINT first, sent again every
    INTERRUPT_RESEND seconds (one that lands while the process is between
    handlers is ignored: ipykernel ignores SIGINT outside a request, and a
    loaded machine can delay the cell's start past a 2 s timeout), then
    poll() says so once INTERRUPT_GRACE has passed and the process must go,
    unless the host has not let it run (starved). Before that, what the
    process wrote is read to its end (wait() is 0 until the cell's loop
    finds nothing and says quiet()): a cell that ended just as the grace
    ran out, its end unread while this thread waited for a core, ends
    as it would have."""

    def __init__(self, cell, interrupt, pgid):
        self.cell, self.interrupt, self.pgid = cell, interrupt, pgid
        self.why = None  # why the cell is being stopped, once it is
        self.since = self.sent = 0.0
        # Set once the process shows the interrupt took (Python's
        # KeyboardInterrupt error): no more SIGINTs then, since one landing
        # while ipykernel formats the traceback could end the kernel.
        self.acked = False
        self.cpu = {}  # past the grace period: each runnable process's CPU time when first seen
        self.looked = 0.0  # when the group was last looked at
        self.draining = None  # when the last read before the replacement began
        self.drained = False  # that read found nothing more

    def poll(self):
        """Checks the cell; True once the grace period is over."""
        now = time.monotonic()
        if self.why is None:
            self.why = self.cell.stopped()
            if self.why is None:
                return False
            self.since = self.sent = now
            self.interrupt()
            return False
        if now - self.since > INTERRUPT_GRACE and not self.starved(now):
            if self.draining is None:
                self.draining = now
            # A process that never stops writing is not read forever.
            return self.drained or now - self.draining > 0.5
        if not self.acked and now - self.sent >= INTERRUPT_RESEND:
            self.sent = now
            self.interrupt()
        return False

    def wait(self, most):
        """How long the cell's loop may wait for its process's next output."""
        return 0.0 if self.draining is not None else most

    def quiet(self):
        """The cell's loop found no output in its wait."""
        if self.draining is not None:
            self.drained = True

    def starved(self, now):
        """True while a process of the cell's process group is runnable
        but has had under STARVED_CPU of CPU since the grace period ended:
        the host is too busy to let it take the SIGINT (a full test run
        saw a shell that had run 30 ms in all wait 3 s for a core, its
        SIGINT still pending). A process that ignores SIGINT either sleeps
        or burns CPU, and goes. Looked at every 0.1 s; at most
        INTERRUPT_STARVED seconds."""
        if now - self.since > INTERRUPT_GRACE + INTERRUPT_STARVED:
            return False
        if now - self.looked < 0.1:
            return True
        self.looked = now
        starved = False
        for pid, cpu in runnable(self.pgid).items():
            if cpu - self.cpu.setdefault(pid, cpu) < STARVED_CPU:
                starved = True
        return starved


def runnable(pgid):
    """The CPU time (seconds) of each runnable process (state R) in
    process group pgid, from /proc (which gVisor's guest has too)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        # The fields after the command's name, which may hold anything
        # but its closing parenthesis: state, ppid, pgrp, ... utime and
        # stime are the 12th and 13th.
        f = stat[stat.rfind(")") + 2:].split()
        if len(f) > 12 and f[0] == "R" and f[2] == str(pgid):
            found[int(name)] = (int(f[11]) + int(f[12])) / tick
    return found


class Turn:
    """Whose turn it is on a context: one caller at a time, in the order
    they came. The caller runs its work on its own thread (the HTTP
    request's), not handed to a thread of the context's: under gVisor each
    wake-up of another thread is a few system calls at the Sentry's price,
    and a hand-off there and back was two of them a cell
    (docs/code-interpreter.md, "On gVisor"). A context's sockets and pipes
    (and Zmtp's buffers) are used by one thread after another, never by two
    at once."""

    def __init__(self):
        self.mu = threading.Lock()
        self.busy = False
        self.waiting = collections.deque()  # a lock per waiting caller, released to hand it the turn

    def take(self, stopped=None):
        """Waits for the turn. stopped (a callable, asked every 50 ms while
        waiting) can give up the wait: then its reason is returned, and the
        turn is not taken. None: the caller has the turn."""
        with self.mu:
            if not self.busy and not self.waiting:
                self.busy = True
                return None
            mine = threading.Lock()
            mine.acquire()
            self.waiting.append(mine)
        if stopped is None:
            mine.acquire()
            return None
        while not mine.acquire(timeout=0.05):
            why = stopped()
            if why is None:
                continue
            with self.mu:
                try:
                    self.waiting.remove(mine)
                    return why
                except ValueError:  # handed the turn meanwhile: it is ours
                    pass
            mine.acquire()
            return None
        return None

    def give(self):
        """Ends the caller's turn: the next waiting caller's, if any."""
        with self.mu:
            if self.waiting:
                self.waiting.popleft().release()
            else:
                self.busy = False


class Context:
    """A context: one language, one process, its state kept across cells."""

    def __init__(self, cid, language, cwd, default):
        self.id, self.language, self.cwd, self.default = cid, language, cwd or "/root", default
        self.notice = None  # said to the next cell after a replaced process
        self.running = None  # the running cell, for interrupt_cell()
        # Everything touching the context's process runs in its turn, one
        # caller at a time, in order: the kernel's sockets must not be used by
        # two threads at once, and cells of one context run one at a time.
        self.turn = Turn()

    def call(self, fn):
        """Runs fn in the context's turn and returns its result."""
        self.turn.take()
        try:
            return fn()
        finally:
            self.turn.give()

    def close(self):
        """Stops the process."""
        self.call(self.stop)

    def ensure_started(self):
        self.call(lambda: None if self.alive() else self.start())

    def view(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd, "default": self.default}

    def run(self, code, env, cwd, cell):
        # A cell waiting behind another can be stopped (deleted, timed out,
        # its client gone) before it starts: it then never runs.
        def stopped():
            cell.tick()  # its response head, while it waits
            return cell.stopped()
        why = self.turn.take(stopped)
        if why is not None:
            self.stopped_cell(cell, why)
            return
        try:
            self.run_here(code, env, cwd, cell)
        finally:
            self.turn.give()

    def run_here(self, code, env, cwd, cell):
        why = cell.stopped()
        if why is not None:
            # Stopped while waiting behind another cell: it never runs.
            self.stopped_cell(cell, why)
            return
        if self.notice:
            cell.sink({"type": "kernel_restarted", "reason": self.notice})
            self.notice = None
        if not self.alive():
            self.start()
        self.running = cell
        cell.state = "running"
        try:
            self.execute(code, env, cwd, cell)
        finally:
            self.running = None

    def interrupt_cell(self):
        """Asks the running cell (if any) to stop; True if there was one."""
        cell = self.running
        if cell is None:
            return False
        cell.interrupt = True
        return True

    def restart(self):
        def again():
            self.stop()
            self.start()
            self.notice = None
        self.call(again)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def interrupt(self):
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
        except OSError:
            pass

    def replace_stuck(self, cell, why, what):
        """Ends a cell whose process (what: "the kernel", "the shell", ...)
        ignored SIGINT past the grace period: the process is replaced."""
        self.stop()
        self.notice = "%s did not stop after SIGINT and was replaced; its state is gone" % what
        self.stopped_cell(cell, why, replaced=True)

    def process_exited(self, cell, what):
        """Ends the cell whose process (what) exited under it; the next cell
        gets a fresh one."""
        self.stop()
        self.notice = "%s exited; this is a fresh one, earlier state is gone" % what
        cell.status = "error"
        cell.sink({"type": "error", "name": "KernelDied", "value": "%s exited while running this cell" % what,
                   "traceback": ""})

    @staticmethod
    def stopped_cell(cell, why, replaced=False):
        """Ends a cell stopped for why; replaced says its process ignored
        SIGINT past the grace period and was replaced."""
        cell.status = why
        kept = ("it did not stop after SIGINT, so its process was replaced and the context's state is gone"
                if replaced else "the context keeps its state")
        if why == "interrupted":
            cell.sink({"type": "error", "name": "Interrupted",
                       "value": "the cell was interrupted on request; " + kept, "traceback": ""})
        if why == "timeout":
            cell.sink({"type": "error", "name": "TimeoutError",
                       "value": "the cell ran past its timeout and was interrupted; " + kept, "traceback": ""})


# ---------------------------------------------------------------- Python


class Zmtp:
    """One ZeroMQ peer socket (a DEALER or a SUB) spoken on a plain stream
    socket (a unix socket, or loopback TCP): ZeroMQ's wire protocol,
    version 3.0, with the NULL mechanism, the part of it a kernel's shell
    and IOPub sockets need. libzmq
    (pyzmq) runs every socket through its I/O thread: each message in or
    out is handed between that thread and the caller's (an eventfd write,
    a wake-up, epoll calls, and a getpid and a poll of the socket's mailbox
    for each call), about 30 system calls a cell in this server. Under
    gVisor a system call and a thread's wake-up cost tens of microseconds
    (docs/code-interpreter.md, "On gVisor"); here a message out is one
    send and a wait for messages in is a poll and a read. The kernel keeps
    libzmq; both speak ZMTP on the wire."""

    GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" + b"\0" * 31

    def __init__(self, info, port, socket_type, deadline):
        while True:  # the kernel's sockets listen before it says so; a refused connect is retried anyway
            try:
                self.sock = self.connect(info, port, max(0.1, deadline - time.monotonic()))
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)
        self.buf = bytearray()
        # Read into, not a new 256 KiB bytes object a read: that size is
        # malloc's mmap threshold, and each read would map and unmap it.
        self.chunk = memoryview(bytearray(262144))
        self.closed = False
        self.poller = select.poll()
        self.poller.register(self.sock, select.POLLIN)
        try:
            self.sock.sendall(self.GREETING + self.frame_bytes(4, b"\x05READY" + self.prop(b"Socket-Type", socket_type)))
            while len(self.buf) < 64:
                self.read_some()
            greeting = bytes(self.buf[:64])
            del self.buf[:64]
            if greeting[0] != 0xff or greeting[9] != 0x7f or greeting[10] < 3 or greeting[12:16] != b"NULL":
                raise OSError("not a ZMTP 3 peer with the NULL mechanism")
            while True:  # the peer's READY (or ERROR)
                f = self.parse_frame(0)
                if f is None:
                    self.read_some()
                    continue
                flags, body, end = f
                del self.buf[:end]
                if flags & 4 and body[1:1 + body[0]] == b"READY":
                    break
                if flags & 4 and body[1:1 + body[0]] == b"ERROR":
                    raise OSError("the kernel refused the ZMTP handshake: %r" % body[7:])
            self.sock.setblocking(False)  # from now on: poll, then read what is there
        except BaseException:
            self.sock.close()
            raise

    @staticmethod
    def connect(info, port, timeout):
        """A socket connected to the kernel's port (a connection file's
        transport, ip and port)."""
        if info["transport"] == "ipc":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(timeout)
                s.connect("%s-%d" % (info["ip"], port))
            except BaseException:
                s.close()
                raise
            return s
        s = socket.create_connection((info["ip"], port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    @staticmethod
    def prop(name, value):
        return bytes([len(name)]) + name + len(value).to_bytes(4, "big") + value

    @staticmethod
    def frame_bytes(flags, body):
        if len(body) > 255:
            return bytes([flags | 2]) + len(body).to_bytes(8, "big") + body
        return bytes([flags, len(body)]) + body

    def read_some(self):
        """Reads during the handshake (a blocking socket with a timeout)."""
        chunk = self.sock.recv(65536)
        if not chunk:
            raise OSError("the kernel closed its socket during the ZMTP handshake")
        self.buf += chunk

    def parse_frame(self, at):
        """The frame at self.buf[at:] as (flags, body, end), or None when
        it is not all there yet."""
        buf = self.buf
        if len(buf) < at + 2:
            return None
        flags = buf[at]
        if flags & 2:
            if len(buf) < at + 9:
                return None
            n, start = int.from_bytes(buf[at + 1:at + 9], "big"), at + 9
        else:
            n, start = buf[at + 1], at + 2
        if len(buf) < start + n:
            return None
        return flags, bytes(buf[start:start + n]), start + n

    def message(self):
        """The next whole message's frames from what was read, or None.
        Commands (a PING, were heartbeats on) are dropped."""
        frames, at = [], 0
        while True:
            f = self.parse_frame(at)
            if f is None:
                return None
            flags, body, at = f
            if flags & 4:
                del self.buf[:at]
                frames, at = [], 0
                continue
            frames.append(body)
            if not flags & 1:
                del self.buf[:at]
                return frames

    def fill(self, timeout):
        """Waits up to timeout seconds for data and reads what is there:
        a poll and a read, or a read alone for timeout 0."""
        if self.closed:
            time.sleep(timeout)
            return
        if timeout > 0 and not self.poller.poll(int(timeout * 1000) + 1):
            return
        try:
            n = self.sock.recv_into(self.chunk)
        except BlockingIOError:
            return
        except OSError:
            n = 0
        if not n:  # the kernel went away: the cell's wait notices (alive())
            self.closed = True
            return
        self.buf += self.chunk[:n]

    def send_multipart(self, frames):
        """Sends a message in one write (more when the socket's buffer
        fills: a large cell)."""
        last = len(frames) - 1
        data = memoryview(b"".join(self.frame_bytes(0 if i == last else 1, f) for i, f in enumerate(frames)))
        while data and not self.closed:
            try:
                data = data[self.sock.send(data):]
            except BlockingIOError:
                select.select([], [self.sock], [], 1.0)
            except OSError:  # the kernel went away: the cell's wait notices (alive()), as for a send before it died
                self.closed = True

    def recv_multipart(self, timeout):
        """The next message's frames; queue.Empty after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            frames = self.message()
            if frames is not None:
                return frames
            left = deadline - time.monotonic()
            if left < 0:
                raise queue.Empty
            self.fill(left)

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


class KernelClient:
    """The client half of the Jupyter messaging protocol (5.3) that a
    context uses: requests and replies on the kernel's shell socket
    (as a DEALER), its output on IOPub (as a SUB), every message signed
    with HMAC-SHA256 over the connection file's key. jupyter_client's client
    does the same, but importing it (its kernel manager, asyncio, traitlets)
    cost the server 150-230 ms of CPU before the first kernel could even be
    launched (docs/code-interpreter.md, "The first result"), and pyzmq's
    sockets cost a cell dozens of system calls (Zmtp); this needs the
    standard library only. Used in the context's turn only (one thread at
    a time)."""

    DELIM = b"<IDS|MSG>"

    def __init__(self, info, deadline=None):
        deadline = deadline if deadline is not None else time.monotonic() + 10
        self.key = info["key"].encode()
        self.session = uuid.uuid4().hex
        self.shell = Zmtp(info, info["shell_port"], b"DEALER", deadline)
        try:
            self.iopub = Zmtp(info, info["iopub_port"], b"SUB", deadline)
        except BaseException:
            self.shell.close()
            raise
        self.iopub.send_multipart([b"\x01"])  # subscribe to everything (ZMTP 3.0's form)

    def sign(self, frames):
        h = hmac.new(self.key, digestmod=hashlib.sha256)
        for f in frames:
            h.update(f)
        return h.hexdigest().encode()

    def send(self, msg_type, content):
        """Sends a shell request; returns its msg_id."""
        header = {"msg_id": "%s_%s" % (self.session, IDS.next()), "session": self.session, "username": "platinum",
                  "date": now_iso(), "msg_type": msg_type, "version": "5.3"}
        frames = [json.dumps(x).encode() for x in (header, {}, {}, content)]
        self.shell.send_multipart([self.DELIM, self.sign(frames)] + frames)
        return header["msg_id"]

    def kernel_info(self):
        return self.send("kernel_info_request", {})

    def execute(self, code, silent=False, store_history=True, allow_stdin=False, stop_on_error=True):
        return self.send("execute_request", {"code": code, "silent": silent,
                                             "store_history": store_history and not silent,
                                             "user_expressions": {}, "allow_stdin": allow_stdin,
                                             "stop_on_error": stop_on_error})

    def recv(self, sock, timeout):
        """The next message on sock as a dict (header, parent_header,
        metadata, content, msg_type, msg_id); queue.Empty after timeout
        seconds. A message with a wrong signature is dropped."""
        deadline = time.monotonic() + timeout
        while True:
            frames = sock.recv_multipart(max(0.0, deadline - time.monotonic()))
            try:
                i = frames.index(self.DELIM)
                sig, parts = frames[i + 1], frames[i + 2:i + 6]
                if len(parts) < 4 or not hmac.compare_digest(sig, self.sign(parts)):
                    continue
                header, parent, metadata, content = (json.loads(p) for p in parts)
            except (ValueError, IndexError):
                continue
            return {"header": header, "parent_header": parent, "metadata": metadata, "content": content,
                    "msg_type": header.get("msg_type"), "msg_id": header.get("msg_id")}

    def get_shell_msg(self, timeout):
        return self.recv(self.shell, timeout)

    def get_iopub_msg(self, timeout):
        return self.recv(self.iopub, timeout)

    def stop_channels(self):
        self.shell.close()
        self.iopub.close()


# How the server reaches its kernels: "ipc" (unix sockets, the default)
# or "tcp" (loopback). Under gVisor a unix socket is a queue in the Sentry,
# while loopback TCP goes through its network stack (segments, ACKs and
# the stack's own goroutines) for every message (docs/code-interpreter.md,
# "On gVisor").
KERNEL_TRANSPORT = os.environ.get("PT_CODE_KERNEL_TRANSPORT", "ipc")


def connection_info(d):
    """A kernel's connection and a new key: unix sockets in the private
    directory d (ipc: "<d>/k-1" ... "<d>/k-5"), or five free loopback ports
    (tcp: picked as jupyter_client picks them, bound to port 0, then
    released)."""
    if KERNEL_TRANSPORT == "ipc":
        ports, ip = [1, 2, 3, 4, 5], os.path.join(d, "k")
    else:
        socks = []
        try:
            for _ in range(5):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.1", 0))
                socks.append(s)
            ports = [s.getsockname()[1] for s in socks]
        finally:
            for s in socks:
                s.close()
        ip = "127.0.0.1"
    info = dict(zip(("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"), ports))
    info.update(ip=ip, key=uuid.uuid4().hex, transport=KERNEL_TRANSPORT, signature_scheme="hmac-sha256",
                kernel_name="")
    return info


class PythonContext(Context):
    """An IPython kernel, launched by the server itself (its connection
    file, its own process group) and spoken to with KernelClient:
    jupyter_client's KernelManager (provisioner lookup, kernelspec search,
    readiness polling) and even its client cost the server as much CPU as
    the kernel's own start."""

    def __init__(self, *a):
        super().__init__(*a)
        self.proc = self.kc = self.conn_dir = None
        self.synced_env = None

    def start(self):
        base = sandbox_env()
        env = dict(os.environ)
        env.update(base)
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        # 0700: the connection file's key signs every message, and the
        # kernel's unix sockets are there.
        self.conn_dir = tempfile.mkdtemp(prefix="pt-kernel-")
        info = connection_info(self.conn_dir)
        conn_file = os.path.join(self.conn_dir, "kernel.json")
        with open(os.open(conn_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            json.dump(info, f)
        # The launcher writes to this pipe once its sockets listen: the
        # client connects then, at once, rather than having ZeroMQ retry
        # a refused connect every 100 ms while the kernel imports (CPU
        # taken from the kernel's start, on a one-CPU sandbox, and up to
        # 100 ms after it listens).
        ready_r, ready_w = os.pipe()
        env["PT_KERNEL_READY_FD"] = str(ready_w)
        # Its own session (process group): SIGINT and the harder kill
        # reach the kernel and whatever it started, never the server.
        try:
            self.proc = subprocess.Popen([sys.executable, KERNEL_FILE, "-f", conn_file] + KERNEL_ARGS, env=env,
                                         cwd=self.cwd if os.path.isdir(self.cwd) else "/", stdin=subprocess.DEVNULL,
                                         start_new_session=True, pass_fds=(ready_w,))
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
        try:
            deadline = time.monotonic() + 60
            self.wait_listening(ready_r, deadline)
            self.kc = KernelClient(info, deadline)
            self.wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(ready_r)
        # The kernel started with base: a variable removed from the
        # sandbox's env later is unset from there (__pt_env, which the
        # kernel's launcher defines).
        self.synced_env = base

    def wait_listening(self, ready_r, deadline):
        """Waits for the launcher's word that the kernel's sockets listen
        (a byte on ready_r; end of file: the kernel exited first)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("the kernel did not start within 60 s")
            if select.select([ready_r], [], [], left)[0]:
                if os.read(ready_r, 1):
                    return
                self.proc.wait()
                raise RuntimeError("the kernel exited while starting (exit %s)" % self.proc.returncode)

    def wait_ready(self, deadline):
        """Returns once the kernel answers on shell and its IOPub reaches
        us (a SUB socket misses what is published before it connects, so
        a status message for our own request proves the first cell's
        output will arrive)."""
        while True:
            msg_id = self.kc.kernel_info()
            got_reply = False
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError("the kernel exited while starting (exit %s)" % self.proc.returncode)
                try:
                    if not got_reply:
                        got_reply = self.kc.get_shell_msg(timeout=0.1)["parent_header"].get("msg_id") == msg_id
                        continue
                    m = self.kc.get_iopub_msg(timeout=0.2)
                except queue.Empty:
                    if got_reply:
                        break  # IOPub missed it: ask again
                    continue
                if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status":
                    return
            if time.monotonic() >= deadline:
                raise RuntimeError("the kernel did not answer within 60 s")

    def stop(self):
        if self.kc is not None:
            try:
                self.kc.stop_channels()
            except Exception:
                pass
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        if self.conn_dir:
            shutil.rmtree(self.conn_dir, ignore_errors=True)
        self.proc = self.kc = self.conn_dir = None

    def silent(self, code):
        """Runs code without output or history and waits for its reply."""
        msg_id = self.kc.execute(code, silent=True, store_history=False, stop_on_error=False)
        # Replies to earlier requests (an interrupted cell whose reply came
        # late) are skipped, not taken for this one.
        while self.kc.get_shell_msg(timeout=30).get("parent_header", {}).get("msg_id") != msg_id:
            pass

    def env_code(self, want):
        have = self.synced_env if self.synced_env is not None else {}
        set_ = {k: v for k, v in want.items() if have.get(k) != v}
        unset = [k for k in have if k not in want] if self.synced_env is not None else []
        if not set_ and not unset:
            return None
        return "__pt_env(%r, %r)" % (set_, unset)

    def execute(self, code, env, cwd, cell):
        base = sandbox_env()
        want = dict(base)
        want.update(env or {})
        sync = self.env_code(want)
        if sync:
            self.silent(sync)
        self.synced_env = want
        if cwd:
            self.silent("__pt_cwd = __pt_os.getcwd(); __pt_os.chdir(%r)" % cwd)
        try:
            self.cell(code, cell)
        finally:
            if (cwd or env) and self.alive():
                if cwd:
                    self.silent("__pt_os.chdir(__pt_cwd)")
                if env:  # per-call variables last only for that call
                    back = self.env_code(base)
                    if back:
                        self.silent(back)
                    self.synced_env = base

    def cell(self, code, cell):
        kc = self.kc
        # stop_on_error=False: otherwise ipykernel, after an error reply,
        # aborts whatever request reaches it in the next moment (meant for
        # a notebook's queued cells), and the cell sent right after a failed
        # or interrupted one came back with no result and no error. Cells
        # here run one at a time, so there is never a queue to abort.
        msg_id = kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        stop = Stopper(cell, self.interrupt, self.proc.pid)
        while True:
            if stop.poll():
                # SIGINT was not enough (C code that ignores it): replace the kernel.
                self.replace_stuck(cell, stop.why, "the kernel")
                return
            stopping = stop.why
            try:
                msg = kc.get_iopub_msg(timeout=stop.wait(cell.wait_time(0.05)))
            except queue.Empty:
                stop.quiet()
                cell.tick()
                if not self.alive():
                    self.died(cell)
                    return
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            t, c = msg["msg_type"], msg["content"]
            if t == "stream":
                if not stopping:
                    cell.sink({"type": c.get("name", "stdout"), "text": c.get("text", "")})
            elif t in ("execute_result", "display_data"):
                if not stopping:
                    cell.sink({"type": "result", "is_main_result": t == "execute_result",
                               "data": c.get("data", {})})
            elif t == "error":
                stop.acked = True
                if not stopping:
                    cell.status = "error"
                    cell.sink({"type": "error", "name": c.get("ename", ""), "value": c.get("evalue", ""),
                               "traceback": "\n".join(c.get("traceback", []))})
            elif t == "execute_input":
                cell.execution_count = c.get("execution_count")
            elif t == "status" and c.get("execution_state") == "idle":
                break
        try:
            reply = kc.get_shell_msg(timeout=5)
            while reply.get("parent_header", {}).get("msg_id") != msg_id:
                reply = kc.get_shell_msg(timeout=5)
            cell.execution_count = reply["content"].get("execution_count", cell.execution_count)
            if reply["content"].get("status") == "aborted" and not stop.why:
                # Never a silent "ok" for a cell the kernel did not run.
                cell.status = "error"
                cell.sink({"type": "error", "name": "Aborted", "value": "the kernel aborted this cell without running it",
                           "traceback": ""})
        except queue.Empty:
            pass
        if stop.why:
            self.stopped_cell(cell, stop.why)

    def died(self, cell):
        code = None
        try:
            code = self.proc.poll()
        except Exception:
            pass
        self.stop()
        reason = "the kernel died while running this cell (exit %s)" % code
        self.notice = reason + "; this is a fresh kernel, earlier state is gone"
        cell.status = "error"
        cell.sink({"type": "error", "name": "KernelDied", "value": reason + "; the next run starts a fresh kernel",
                   "traceback": ""})


# ---------------------------------------------------------------- processes speaking a line protocol


class ProcContext(Context):
    """A context backed by one child process (node for JavaScript, bash)."""

    def __init__(self, *a):
        super().__init__(*a)
        self.proc = None

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if f:
                    f.close()
        self.proc = None

    def spawn(self, argv, **kw):
        base = sandbox_env()
        env = dict(os.environ)
        env.update(base)
        # What the process started with: later cells apply the difference
        # (removals included).
        self.synced_env = base
        return subprocess.Popen(argv, cwd=self.cwd if os.path.isdir(self.cwd) else "/", env=env,
                                start_new_session=True, **kw)


class JSContext(ProcContext):
    """JavaScript cells in one node `vm` context (repl.js): globals and
    top-level declarations persist; an interrupt breaks a running cell.
    Interrupts go to repl.js as the cell's number on a pipe of their own,
    not as SIGINT: node dies of a SIGINT that lands as breakOnSigint's
    watchdog starts or stops, and repl.js signals itself only while the
    watchdog holds SIGINT (repl.js says how)."""

    def __init__(self, *a):
        super().__init__(*a)
        self.intr_w = None
        self.seq = 0

    def start(self):
        r, w = os.pipe()
        os.set_blocking(w, False)  # a full pipe drops a resend, never blocks the cell's thread
        argv = ["node", os.path.join(HERE, "repl.js"), "--interrupt-fd=%d" % r] + (
            ["--typescript"] if self.language == "typescript" else [])
        try:
            self.proc = self.spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   bufsize=0, pass_fds=(r,))
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        self.intr_w = w
        self.events = queue.Queue()
        threading.Thread(target=self.pump, args=(self.proc.stdout, self.events), daemon=True).start()
        threading.Thread(target=self.drain, args=(self.proc.stderr,), daemon=True).start()

    @staticmethod
    def pump(f, q):
        for line in f:
            try:
                q.put(json.loads(line))
            except ValueError:  # the cell wrote to process.stdout itself
                q.put({"type": "stdout", "text": line.decode(errors="replace")})
        q.put(None)

    @staticmethod
    def drain(f):
        for line in f:
            sys.stderr.write("repl.js: " + line.decode(errors="replace"))

    def stop(self):
        super().stop()
        if self.intr_w is not None:
            os.close(self.intr_w)
            self.intr_w = None

    def interrupt(self):
        try:
            os.write(self.intr_w, b"%d\n" % self.seq)
        except (OSError, TypeError):
            pass

    def execute(self, code, env, cwd, cell):
        want = sandbox_env()
        self.seq = (self.seq + 1) & 0x1FFFFFFF
        req = {"seq": self.seq, "code": code, "env": {k: v for k, v in want.items() if self.synced_env.get(k) != v},
               "unset": [k for k in self.synced_env if k not in want], "call_env": env or {}, "cwd": cwd or ""}
        self.synced_env = want
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        stop = Stopper(cell, self.interrupt, self.proc.pid)
        while True:
            if stop.poll():
                self.replace_stuck(cell, stop.why, "the JavaScript process")
                return
            stopping = stop.why
            try:
                ev = self.events.get(timeout=stop.wait(cell.wait_time(0.05)))
            except queue.Empty:
                stop.quiet()
                cell.tick()
                continue
            if ev is None:
                self.process_exited(cell, "the JavaScript process")
                return
            if ev["type"] == "end":
                cell.execution_count = ev.get("execution_count")
                break
            if stopping:
                continue
            if ev["type"] == "error":
                cell.status = "error"
            cell.sink(ev)
        if stop.why:
            self.stopped_cell(cell, stop.why)


class BashContext(ProcContext):
    """Cells sourced by one persistent bash: variables, functions and the
    working directory persist. A cell that ignores SIGINT past the grace
    period gets a fresh shell (said so)."""

    def start(self):
        self.proc = self.spawn(["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        self.count = 0
        # SIGINT ends the cell being sourced (`return` from `.`), not the
        # shell; between cells it does nothing (the return fails quietly).
        # A plain `trap true` would go on with the cell's next line. Until
        # bash has read the trap a SIGINT ends it, so the first cell (which
        # may be interrupted at once) waits for bash to say it has.
        ready = b"\x1eready\n"
        self.proc.stdin.write(b"trap 'return 130 2>/dev/null' INT\nprintf '\\036ready\\n'\n")
        got, deadline = b"", time.monotonic() + 30
        while got != ready and time.monotonic() < deadline:
            if select.select([self.proc.stdout], [], [], 1.0)[0]:
                chunk = os.read(self.proc.stdout.fileno(), len(ready) - len(got))
                if not chunk:
                    break  # it died: the cell finds it so
                got += chunk

    def execute(self, code, env, cwd, cell):
        self.count += 1
        token = uuid.uuid4().hex
        path = "/tmp/.pt-cell-%s.sh" % token
        with open(path, "w") as f:
            f.write(code + "\n")
        # Removed here, not by an `rm` in the shell: that was a fork and an
        # exec every cell, and an edge for a SIGINT to land on (the shells
        # replaced under random interrupts on a loaded host were each
        # waiting on that fork's child, or running with it just dead).
        try:
            self.source(path, token, env, cwd, cell)
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass

    def source(self, path, token, env, cwd, cell):
        """Runs the cell written at path in the shell, through to its end."""
        want = sandbox_env()
        pre = "".join("export %s=%s\n" % (k, shq(v)) for k, v in want.items()
                      if self.synced_env.get(k) != v and k.isidentifier())
        pre += "".join("unset %s\n" % k for k in self.synced_env if k not in want and k.isidentifier())
        self.synced_env = want
        body = ". %s" % path
        if env or cwd:  # per-call env and cwd in a subshell: they last only for that cell
            exports = "".join("export %s=%s; " % (k, shq(v)) for k, v in (env or {}).items() if k.isidentifier())
            body = "( %s%s. %s )" % (exports, ("cd %s && " % shq(cwd)) if cwd else "", path)
        # The end marker starts with an ASCII record separator, not a
        # newline: output is sent as it comes, holding back only a tail
        # that could be the marker's start (a cell's "started\n" must not
        # wait for the cell's end). Each printf is one write.
        end = "__PT_END_" + token
        script = ("%s%s\n__pt_rc=$?; printf '\\036%s %%d\\n' $__pt_rc; printf '\\036%s\\n' >&2\n"
                  % (pre, body, end, end))
        self.proc.stdin.write(script.encode())
        bufs = {"stdout": b"", "stderr": b""}
        done = {"stdout": False, "stderr": False}
        files = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr"}
        marker = ("\x1e" + end).encode()
        text = {n: codecs.getincrementaldecoder("utf-8")(errors="replace") for n in bufs}
        rc = 0
        stop = Stopper(cell, self.interrupt, self.proc.pid)
        while not all(done.values()):
            if stop.poll():
                self.replace_stuck(cell, stop.why, "the shell")
                return
            stopping = stop.why
            fds = [fd for fd, name in files.items() if not done[name]]
            ready, _, _ = select.select(fds, [], [], stop.wait(cell.wait_time(0.05)))
            if not ready:
                stop.quiet()
                cell.tick()
            for fd in ready:
                name = files[fd]
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.process_exited(cell, "the shell")
                    return
                buf = bufs[name] + chunk
                i = buf.find(marker)
                if i >= 0:
                    rest = buf[i + len(marker):]
                    if name == "stdout":
                        try:
                            rc = int(rest.split(b"\n")[0].strip() or b"0")
                        except ValueError:
                            rc = 0
                    out, done[name] = text[name].decode(buf[:i], final=True), True
                    if out and not stopping:
                        cell.sink({"type": name, "text": out})
                    bufs[name] = b""
                    continue
                keep = marker_start(buf, marker)
                out, bufs[name] = text[name].decode(buf[:len(buf) - keep]), buf[len(buf) - keep:]
                if out and not stopping:
                    cell.sink({"type": name, "text": out})
        cell.execution_count = self.count
        if stop.why:
            self.stopped_cell(cell, stop.why)
        elif rc != 0:
            cell.status = "error"
            cell.sink({"type": "error", "name": "ExitCode", "value": str(rc), "traceback": ""})


def marker_start(buf, marker):
    """The length of the longest tail of buf that is a proper prefix of
    marker (0 when none): the bytes that may be the marker's first part."""
    j = buf.find(marker[:1], max(0, len(buf) - len(marker) + 1))
    while j >= 0 and not marker.startswith(buf[j:]):
        j = buf.find(marker[:1], j + 1)
    return len(buf) - j if j >= 0 else 0


def shq(s):
    return "'" + str(s).replace("'", "'\\''") + "'"


KINDS = {"python": PythonContext, "javascript": JSContext, "typescript": JSContext, "bash": BashContext}


# ---------------------------------------------------------------- registry


class Contexts:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_id = {}
        self.defaults = {}

    def language(self, name):
        lang = LANGUAGES.get((name or "python").lower())
        if lang is None:
            raise HTTPError(400, "invalid_request", "unknown language %r: use python, javascript, typescript or bash" % name)
        return lang

    def create(self, language, cwd=None):
        lang = self.language(language)
        ctx = KINDS[lang]("ctx_" + uuid.uuid4().hex[:24], lang, cwd, False)
        with self.lock:
            self.by_id[ctx.id] = ctx
        return ctx

    def default(self, language):
        lang = self.language(language)
        with self.lock:
            ctx = self.defaults.get(lang)
            if ctx is None:
                ctx = KINDS[lang]("ctx_default_" + lang, lang, None, True)
                self.defaults[lang] = self.by_id[ctx.id] = ctx
        return ctx

    def get(self, cid):
        with self.lock:
            ctx = self.by_id.get(cid)
        if ctx is None:
            raise HTTPError(404, "not_found", "context %s not found" % cid)
        return ctx

    def remove(self, cid):
        ctx = self.get(cid)
        with self.lock:
            self.by_id.pop(cid, None)
            if self.defaults.get(ctx.language) is ctx:
                del self.defaults[ctx.language]
        ctx.close()

    def list(self):
        with self.lock:
            return [c.view() for c in self.by_id.values()]


CONTEXTS = Contexts()


# ---------------------------------------------------------------- HTTP


def e2b_event(ev):
    """Platinum's event → E2B's NDJSON message (None: nothing to send)."""
    t = ev["type"]
    if t in ("stdout", "stderr"):
        return {"type": t, "text": ev["text"], "timestamp": now_iso()}
    if t == "result":
        out = {"type": "result", "is_main_result": ev["is_main_result"]}
        extra = {}
        for mime, val in ev["data"].items():
            key = E2B_KEYS.get(mime)
            if key:
                out[key] = val if not isinstance(val, (dict, list)) or key == "json" else json.dumps(val)
            else:
                extra[mime] = val
        if extra:
            out["extra"] = extra
        return out
    if t == "error":
        return {"type": "error", "name": ev["name"], "value": ev["value"], "traceback": ev["traceback"]}
    if t == "kernel_restarted":
        return {"type": "stderr", "text": "[platinum] %s\n" % ev["reason"], "timestamp": now_iso()}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "platinum-code-interpreter"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        # Events are small writes: without NODELAY, Nagle and the peer's
        # delayed ACK hold each for ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_CODE + 65536 * 4 + 4096:
            # The body stays unread: this connection cannot carry another request.
            self.close_connection = True
            raise HTTPError(413, "code_too_large", "request body over %d bytes" % (MAX_CODE + 4096))
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        try:
            v = json.loads(raw)
        except ValueError as e:
            raise HTTPError(400, "invalid_request", "body is not JSON: %s" % e)
        if not isinstance(v, dict):
            raise HTTPError(400, "invalid_request", "body must be a JSON object")
        return v

    def reply(self, status, obj):
        b = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def fail(self, e, native):
        if native:
            self.reply(e.status, {"code": e.code, "error": e.message})
        else:
            b = e.message.encode()
            self.send_response(e.status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

    def route(self, method):
        path, _, query = self.path.partition("?")
        native = path.startswith("/v1/")
        p = path[3:] if native else path
        try:
            if method == "GET" and p == "/health":
                # ?kernel=python answers once the default Python kernel
                # (started at boot) is up: a warm pool hands out a sandbox
                # whose first cell does not wait for IPython to start
                # (docs/code-interpreter.md, "The first result").
                if "kernel=python" in query.split("&"):
                    CONTEXTS.default("python").ensure_started()
                return self.reply(200, {"status": "ok"})
            if method == "POST" and p == "/execute":
                return self.execute(self.body(), native)
            if p == "/contexts":
                if method == "GET":
                    return self.reply(200, CONTEXTS.list())
                if method == "POST":
                    b = self.body()
                    ctx = CONTEXTS.create(b.get("language"), b.get("cwd"))
                    ctx.ensure_started()
                    return self.reply(201 if native else 200, ctx.view())
            if method == "GET" and p == "/executions":
                return self.reply(200, EXECUTIONS.list())
            parts = p.strip("/").split("/")
            if method == "DELETE" and len(parts) == 2 and parts[0] == "executions":
                EXECUTIONS.stop(parts[1])
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if len(parts) >= 2 and parts[0] == "contexts":
                if method == "DELETE" and len(parts) == 2:
                    CONTEXTS.remove(parts[1])
                    self.send_response(204)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if method == "POST" and len(parts) == 3 and parts[2] == "interrupt":
                    ctx = CONTEXTS.get(parts[1])
                    return self.reply(200, {"interrupted": ctx.interrupt_cell()})
                if method == "POST" and len(parts) == 3 and parts[2] == "restart":
                    ctx = CONTEXTS.get(parts[1])
                    ctx.restart()
                    return self.reply(200, ctx.view())
            raise HTTPError(404, "not_found", "no route %s %s" % (method, path))
        except HTTPError as e:
            self.fail(e, native)

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def client_alive(self):
        """False once the client closed its side (it went away)."""
        sock = self.connection
        try:
            r, _, _ = select.select([sock], [], [], 0)
            if not r:
                return True
            return sock.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def execute(self, b, native):
        code = b.get("code")
        if not isinstance(code, str):
            raise HTTPError(400, "invalid_request", "code (a string) is required")
        if len(code.encode()) > MAX_CODE:
            raise HTTPError(413, "code_too_large", "code is over %d bytes" % MAX_CODE)
        env = b.get("env" if native else "env_vars") or {}
        if not isinstance(env, dict):
            raise HTTPError(400, "invalid_request", "env must be an object of strings")
        env = {str(k): str(v) for k, v in env.items()}
        if b.get("context_id"):
            ctx = CONTEXTS.get(b["context_id"])
            if b.get("language") and CONTEXTS.language(b["language"]) != ctx.language:
                raise HTTPError(400, "invalid_request", "context %s runs %s, not %s" % (ctx.id, ctx.language, b["language"]))
        else:
            ctx = CONTEXTS.default(b.get("language"))
        timeout = b.get("timeout_ms") if native else None
        if timeout is not None and (not isinstance(timeout, int) or timeout <= 0):
            raise HTTPError(400, "invalid_request", "timeout_ms must be a positive integer")
        cwd = b.get("cwd") or None
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isdir(cwd)):
            raise HTTPError(400, "invalid_request", "cwd %r is not a directory in the sandbox" % (cwd,))
        gone = [False]
        held = []  # what is written and not yet sent: the response head, then chunks (see HOLD)

        def flush():
            """Sends what is held, in one write."""
            cell.due = None
            if not held:
                return
            data = b"".join(held)
            held.clear()
            if gone[0]:
                return
            try:
                self.wfile.write(data)  # unbuffered: one sendall
            except OSError:
                gone[0] = True

        def write(obj, last=False):
            """Adds obj as one chunk (and the stream's terminator when
            last, then sends everything held: one write, one segment, for
            the event a client waits on). Otherwise the chunk is held for
            at most HOLD seconds: the context sends it when its process's
            next event is not there by then (Cell.tick)."""
            data = (json.dumps(obj) + "\n").encode()
            held.append(b"%x\r\n%s\r\n%s" % (len(data), data, b"0\r\n\r\n" if last else b""))
            if last:
                flush()
            elif cell.due is None:
                cell.due = time.monotonic() + HOLD

        def sink(ev):
            out = ev if native else e2b_event(ev)
            if out is not None:
                write(out)

        cell = Cell(sink, timeout / 1000.0 if timeout else None, lambda: not gone[0] and self.client_alive(), ctx)
        cell.flush = flush
        start = time.monotonic()
        EXECUTIONS.add(cell)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            # Known before the first event, so another client can stop the
            # cell with DELETE /executions/{id} while it runs: the head
            # goes with the first event, or alone HOLD seconds after the
            # cell came, whichever is first.
            self.send_header("X-Execution-Id", cell.id)
            self._headers_buffer.append(b"\r\n")
            held.append(b"".join(self._headers_buffer))
            self._headers_buffer = []
            cell.due = start + HOLD
            try:
                ctx.run(code, env, cwd, cell)
            except Exception as e:  # a broken kernel start, a closed pipe: the cell's error
                cell.status = "error"
                sink({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": ""})
            # Off the list before the end is written: a client that read
            # the end and then lists executions must not see this cell.
            EXECUTIONS.discard(cell)
            if native:
                write({"type": "end", "execution_id": cell.id, "context_id": ctx.id,
                       "execution_count": cell.execution_count, "status": cell.status,
                       "duration_ms": round((time.monotonic() - start) * 1000, 3)}, last=True)
            else:
                if cell.execution_count is not None:
                    write({"type": "number_of_executions", "execution_count": cell.execution_count})
                write({"type": "end_of_execution"}, last=True)
            if gone[0]:
                # The stream did not end cleanly: the connection cannot carry another request.
                self.close_connection = True
        finally:
            EXECUTIONS.discard(cell)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    port = int(os.environ.get("PT_CODE_PORT", "49999"))
    install_kernel()
    srv = Server(("0.0.0.0", port), Handler)

    def shutdown(*_):
        for c in list(CONTEXTS.by_id.values()):
            try:
                c.stop()
            except Exception:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, shutdown)
    # Children inherit an ignored SIGINT (a parent started in the
    # background may have ignored it), which would make interrupts no-ops.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # The default Python kernel starts at once, so a sandbox's first cell
    # does not wait for IPython to boot.
    if os.environ.get("PT_CODE_PREWARM", "1") == "1":
        def warm():
            try:
                CONTEXTS.default("python").ensure_started()
            except Exception as e:
                sys.stderr.write("prewarm: %s\n" % e)
        threading.Thread(target=warm, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
