# bobbin-gdb.py — gdb commands to see bobbin's green threads (Gs).
#
# gdb only knows the OS threads (Ms); every pthread of the program is a G that
# runs on some M now and then, and when it is parked (mutex, condvar, sleep, I/O,
# join...) its registers are in g->ctx and no OS thread shows it. This file
# teaches gdb to list and backtrace Gs, in a live process (gdb -p PID) or in a
# core file:
#
#   (gdb) source scripts/bobbin-gdb.py
#   (gdb) info gthreads            one line per G that is not dead
#   (gdb) gthread 5 bt             backtrace of G 5 (any bt arguments: `bt full`, `bt 5`)
#   (gdb) gthread 5 info frame     any command, run with G 5's registers
#   (gdb) gthread all bt           every G's backtrace
#
# From the shell: scripts/bobbin dump [-v] PID.
#
# How `gthread N CMD` works:
#   - a G on an M (running, in a system call, or waiting pinned on its M) is an
#     OS thread: CMD runs on the gdb thread whose LWP is that M's tid;
#   - a parked G: on a live process, the selected thread's rsp, rip, rbp, rbx and
#     r12-r15 are set to the G's saved ones (g->ctx), CMD runs, and the registers
#     (and orig_rax, so an interrupted system call still restarts) are put back
#     before the command returns. Nothing else of the process changes.
#   - a core file cannot take register writes: a Python unwinder makes the G's
#     saved registers the caller of the selected thread's frame 0, and the
#     backtrace from there is printed, renumbered from #0 (bt and its arguments
#     only). If that fails too, the frame-pointer chain from g->ctx.rbp is walked
#     and printed with symbols (bobbin is built with frame pointers).
#
# Reads only: bobbin's `allgs` registry (runtime/debug.c), which holds every G
# ever made (Gs are pooled, never freed), and the G and M structures
# (runtime/runtime.h) through gdb's view of libbobbin.so's debug info.

import re
import struct

import gdb

try:
    from gdb.unwinder import Unwinder, register_unwinder
except ImportError:  # gdb without Python unwinders: the frame-pointer walk remains
    Unwinder = object
    register_unwinder = None

CTX_REGS = ("rsp", "rip", "rbp", "rbx", "r12", "r13", "r14", "r15")

# display names, as runtime/debug.c's dump prints them
_STATUS_FALLBACK = ["idle", "runnable", "running", "syscall", "waiting", "preempted", "dead"]
_WAIT_FALLBACK = ["", "join", "once", "semacquire", "sleep", "yield", "mutex", "cond",
                  "IO wait"]
_WAIT_SPECIAL = {"Zero": "", "Sema": "semacquire", "IO": "IO wait"}


class BobbinError(Exception):
    pass


def _enum_names(first, prefix, special, fallback):
    """names by value of the anonymous enum that has enumerator `first`"""
    try:
        t = gdb.parse_and_eval(first).type.strip_typedefs()
        names = {}
        for f in t.fields():
            n = f.name
            if n.endswith("Count"):
                continue
            short = n[len(prefix):] if n.startswith(prefix) else n
            names[f.enumval] = special.get(short, short.lower())
        return names
    except gdb.error:
        return dict(enumerate(fallback))


class _Layout:
    """offsets and sizes of a struct's fields, to unpack raw memory quickly"""

    def __init__(self, t):
        self.type = t.strip_typedefs()
        self.size = self.type.sizeof
        self.fields = {}
        for f in self.type.fields():
            if f.bitpos is None or f.name is None:
                continue
            self.fields[f.name] = (f.bitpos // 8, f.type)

    def off(self, name):
        return self.fields[name][0]

    def int(self, raw, name, size=None, signed=False):
        off, t = self.fields[name]
        n = size or t.strip_typedefs().sizeof
        return int.from_bytes(raw[off:off + n], "little", signed=signed)


class Runtime:
    """a snapshot of bobbin's G registry in the selected inferior"""

    def __init__(self):
        self.inf = gdb.selected_inferior()
        if self.inf.pid == 0 and not self.inf.threads():
            raise BobbinError("no process: run, attach (gdb -p PID) or load a core first")
        allgs_sym = self._static("allgs")
        nallgs_sym = self._static("nallgs")
        if allgs_sym is None or nallgs_sym is None:
            raise BobbinError("bobbin's runtime is not in this process (no `allgs` symbol "
                              "of libbobbin.so: was it run under LD_PRELOAD=libbobbin.so, "
                              "and built with debug info?)")
        gptr = allgs_sym.type.strip_typedefs().target()       # bb_g *
        self.g = _Layout(gptr.target())
        self.m = _Layout(self.g.fields["m"][1].strip_typedefs().target())
        self.ctx = _Layout(self.g.fields["ctx"][1])
        self.ptr_size = gptr.sizeof
        allgs = int(allgs_sym.value())
        n = int(nallgs_sym.value())
        self.gs = []
        if allgs and n > 0:
            raw = bytes(self.inf.read_memory(allgs, n * self.ptr_size))
            self.gs = [int.from_bytes(raw[i * 8:i * 8 + 8], "little") for i in range(n)]
        self.status_names = _enum_names("Gidle", "G", {}, _STATUS_FALLBACK)
        self.wait_names = _enum_names("waitReasonZero", "waitReason", _WAIT_SPECIAL,
                                      _WAIT_FALLBACK)
        try:
            self.Gdead = int(gdb.parse_and_eval("Gdead"))
        except gdb.error:
            self.Gdead = 6
        try:
            self.magic = int(gdb.parse_and_eval("(unsigned int)%d" % 0x62626F62))
        except gdb.error:
            self.magic = 0x62626F62
        self._mcache = {}
        try:
            self.active = bool(gdb.parse_and_eval("bb_active"))
        except gdb.error:
            self.active = True

    @staticmethod
    def _static(name):
        """bobbin's static variable `name` (runtime/debug.c), not some other file's"""
        syms = []
        try:
            syms = gdb.lookup_static_symbols(name)
        except (AttributeError, gdb.error):
            s = gdb.lookup_static_symbol(name) if hasattr(gdb, "lookup_static_symbol") else None
            syms = [s] if s else []
        for s in syms:
            if s.symtab and s.symtab.filename.endswith("debug.c"):
                return s
        return syms[0] if syms else None

    def read_g(self, addr):
        raw = bytes(self.inf.read_memory(addr, self.g.size))
        L = self.g
        d = {"addr": addr}
        for f in ("goid", "status", "waitreason", "stack_lo", "stack_hi", "waitsince"):
            d[f] = L.int(raw, f, signed=(f == "waitsince"))
        d["magic"] = L.int(raw, "magic")
        d["m"] = L.int(raw, "m")
        d["fn"] = L.int(raw, "fn")
        d["is_main"] = raw[L.off("is_main")] != 0
        d["pinned_wait"] = raw[L.off("pinned_wait")] != 0 if "pinned_wait" in L.fields else False
        off = L.off("name")
        d["name"] = raw[off:off + 16].split(b"\0", 1)[0].decode("utf-8", "replace")
        coff = L.off("ctx")
        d["ctx"] = {r: self.ctx.int(raw[coff:coff + self.ctx.size], r) for r in CTX_REGS}
        return d

    def read_m(self, addr):
        if addr not in self._mcache:
            raw = bytes(self.inf.read_memory(addr, self.m.size))
            self._mcache[addr] = {"id": self.m.int(raw, "id", signed=True),
                                  "tid": self.m.int(raw, "tid", signed=True)}
        return self._mcache[addr]

    def live_gs(self):
        """every G that is not dead, in creation order"""
        out = []
        for a in self.gs:
            try:
                g = self.read_g(a)
            except gdb.MemoryError:
                continue
            if g["status"] != self.Gdead:
                out.append(g)
        return out

    def find(self, goid):
        for a in self.gs:
            try:
                g = self.read_g(a)
            except gdb.MemoryError:
                continue
            if g["goid"] == goid and g["status"] != self.Gdead:
                return g
        return None

    def status(self, g):
        return self.status_names.get(g["status"], "?%d" % g["status"])

    def wait(self, g):
        return self.wait_names.get(g["waitreason"], "?%d" % g["waitreason"])


# ---- symbols -------------------------------------------------------------------

_symcache = {}


def _objfile_name(pc):
    try:
        so = gdb.solib_name(pc)
    except gdb.error:
        so = None
    if so:
        return so
    try:
        p = gdb.current_progspace().filename
    except gdb.error:
        p = None
    return p or ""


def symbolize(pc, is_return=False):
    """(function, offset, short file:line or '', objfile basename) for pc;
    is_return: pc is a return address, so look up pc - 1 (the call)"""
    key = (pc, is_return)
    if key in _symcache:
        return _symcache[key]
    look = pc - 1 if is_return and pc else pc
    func, off, where = None, 0, ""
    try:
        out = gdb.execute("info symbol %#x" % look, to_string=True).strip()
        m = re.match(r"(\S+)(?: \+ (\d+))? in section", out)
        if m:
            func = m.group(1)
            off = int(m.group(2) or 0) + (pc - look)
    except gdb.error:
        pass
    try:
        sal = gdb.find_pc_line(look)
        if sal.symtab is not None and sal.line:
            where = "%s:%d" % (sal.symtab.filename.rsplit("/", 1)[-1], sal.line)
        if func is None:
            b = gdb.block_for_pc(look)
            while b is not None and b.function is None:
                b = b.superblock
            if b is not None:
                func = b.function.name
                off = pc - b.start
    except (gdb.error, RuntimeError):
        pass
    lib = _objfile_name(look).rsplit("/", 1)[-1]
    r = (func, off, where, lib)
    _symcache[key] = r
    return r


def fmt_sym(pc, is_return=False, with_off=False):
    func, off, where, lib = symbolize(pc, is_return)
    if func is None:
        return "%#x%s" % (pc, " (%s)" % lib if lib else "")
    s = func + ("+%#x" % off if with_off and off else "")
    return s + (" (%s)" % where if where else "")


# ---- asynchronous preemption ----------------------------------------------------
#
# A G stopped by the preemption signal resumes in bb_asyncpreempt
# (asm/asyncpreempt_x86_64_sysv_elf.S), which pushes rflags and the 15 general
# registers below the interrupted rip (itself 128 bytes, a red zone, below the
# interrupted rsp) and keeps that address in rbx. Its CFI does not say so, so
# gdb's own unwinder stops there; the unwinder below reads the saved registers.

_AP_SLOTS = ("r15", "r14", "r13", "r12", "r11", "r10", "r9", "r8", "rbp", "rdi", "rsi",
             "rdx", "rcx", "rbx", "rax")  # at rbx + 8*i; rflags at +120, rip at +128
_ap_cache = {}


def _ap_reset(*_):
    _ap_cache.clear()
    _symcache.clear()


def asyncpreempt_range():
    """(first, last) pc of bb_asyncpreempt at which rbx holds the saved registers"""
    if "range" in _ap_cache:
        return _ap_cache["range"]
    r = None
    try:
        start = int(gdb.parse_and_eval("(unsigned long)&bb_asyncpreempt"))
        arch = gdb.selected_inferior().architecture()
        first = last = None
        for insn in arch.disassemble(start, start + 1024):
            asm = insn["asm"].replace(" ", "")
            if first is None and asm.startswith("mov%rsp,%rbx"):
                first = insn["addr"] + insn["length"]
            elif first is not None and asm.startswith("mov%rbx,%rsp"):
                last = insn["addr"]
                break
            elif asm.startswith("ret"):
                break
        if first is not None and last is not None:
            r = (first, last)
    except (gdb.error, gdb.MemoryError, RuntimeError):
        r = None
    _ap_cache["range"] = r
    return r


def in_asyncpreempt(pc):
    r = asyncpreempt_range()
    return r is not None and r[0] <= pc <= r[1]


def _ap_saved(inf, fp):
    """fp: the frame pointer of bb_asyncpreempt2, whose return address is in
    bb_asyncpreempt. Returns the address of the saved registers (bb_asyncpreempt's
    rbx), found below its xsave area, or None"""
    try:
        xsave = int(gdb.parse_and_eval("bb_xsave_size"))
        saved_rbp = int.from_bytes(bytes(inf.read_memory(fp, 8)), "little")
    except (gdb.error, gdb.MemoryError):
        return None
    base = fp + 16 + xsave  # rsp after `and $-64` <= rbx - xsave < rsp + 64
    for x in range(base, base + 64, 8):
        try:
            if int.from_bytes(bytes(inf.read_memory(x + 64, 8)), "little") == saved_rbp:
                return x
        except gdb.MemoryError:
            return None
    return None


def fp_walk(rt, g, limit=64):
    """[(pc, is_return)] of a parked G, from g->ctx through the frame-pointer chain"""
    inf = rt.inf
    pc, fp = g["ctx"]["rip"], g["ctx"]["rbp"]
    lo, hi = g["stack_lo"], g["stack_hi"]
    frames = []
    # ctx.rip is where the G resumes: a return address (after the call to
    # bb_mcall), except for a G that never ran (bb_gstart's first instruction)
    first_is_return = g["status"] != 0 and symbolize(pc)[0] != "bb_gstart"
    frames.append((pc, first_is_return))
    if in_asyncpreempt(pc):  # saved right there: rbx is bb_asyncpreempt's own
        try:
            frames.append((int.from_bytes(bytes(inf.read_memory(g["ctx"]["rbx"] + 128, 8)),
                                          "little"), False))
        except gdb.MemoryError:
            pass
    prev = 0
    while len(frames) < limit and fp and not (fp & 7) and fp > prev:
        if hi > lo and not (lo <= fp and fp + 16 <= hi):
            break
        try:
            raw = bytes(inf.read_memory(fp, 16))
        except gdb.MemoryError:
            break
        nfp, ret = struct.unpack("<QQ", raw)
        if ret == 0:
            break
        frames.append((ret, True))
        if in_asyncpreempt(ret):  # the interrupted pc, then its rbp chain
            x = _ap_saved(inf, fp)
            if x is not None:
                try:
                    frames.append((int.from_bytes(bytes(inf.read_memory(x + 128, 8)),
                                                  "little"), False))
                except gdb.MemoryError:
                    break
        prev, fp = fp, nfp
    return frames


def is_bobbin(pc):
    return "libbobbin" in _objfile_name(pc)


def called_name(inf, ret):
    """the function a call instruction ending at ret called (through the PLT, or
    through the GOT with -fno-plt), or None: the name the program used, where
    bobbin's own frame may be a helper it jumped to"""
    try:
        raw = bytes(inf.read_memory(ret - 6, 6))
    except gdb.MemoryError:
        return None
    target = None
    if raw[1] == 0xE8:  # call rel32
        target = (ret + int.from_bytes(raw[2:6], "little", signed=True)) & _MASK
    elif raw[0] == 0xFF and raw[1] == 0x15:  # call *disp32(%rip)
        slot = (ret + int.from_bytes(raw[2:6], "little", signed=True)) & _MASK
        try:
            target = int.from_bytes(bytes(inf.read_memory(slot, 8)), "little")
        except gdb.MemoryError:
            return None
    if not target:
        return None
    func, off = symbolize(target)[:2]
    if func is None or off:
        return None
    return func.split("@", 1)[0]


def where_parked(rt, g):
    """the bobbin function the program called, and the program's frame calling it"""
    frames = fp_walk(rt, g)
    entry = None
    for pc, ret in frames:
        if is_bobbin(pc):
            entry = (pc, ret)
            continue
        s = fmt_sym(pc, ret)
        if entry is not None and in_asyncpreempt(entry[0]):
            return "preempted in " + s
        if entry is not None:
            called = called_name(rt.inf, pc) if ret else None
            return "%s <- %s" % (called or symbolize(*entry)[0] or "?", s)
        return s
    pc, ret = frames[0]
    return fmt_sym(pc, ret)


# ---- threads -------------------------------------------------------------------

def thread_for_tid(tid):
    for t in gdb.selected_inferior().threads():
        if t.ptid[1] == tid or (t.ptid[1] == 0 and t.ptid[0] == tid):
            return t
    return None


def frame0_of(thread):
    old = gdb.selected_thread()
    try:
        thread.switch()
        f = gdb.newest_frame()
        name = f.name()
        sal = f.find_sal()
        where = ""
        if sal.symtab is not None and sal.line:
            where = " (%s:%d)" % (sal.symtab.filename.rsplit("/", 1)[-1], sal.line)
        return (name or "%#x" % f.pc()) + where
    except gdb.error:
        return "?"
    finally:
        if old is not None and old.is_valid():
            old.switch()


# ---- info gthreads -------------------------------------------------------------

class InfoGthreads(gdb.Command):
    """List bobbin's green threads (Gs) that are not dead.

Usage: info gthreads

One line per G: its id (goid, as `gthread N` takes it), name (pthread_setname_np),
status, wait reason, the M (OS thread: bobbin id and kernel tid) it is on, its
start routine, and where it is: for a G on an M, that thread's current frame;
for a parked G, the bobbin call it waits in and the program's function that
made it (from the saved frame pointers)."""

    def __init__(self):
        super().__init__("info gthreads", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        try:
            rt = Runtime()
        except BobbinError as e:
            raise gdb.GdbError(str(e))
        gs = rt.live_gs()
        rows = []
        for g in gs:
            name = g["name"] or ("main" if g["is_main"] else "")
            st = rt.status(g)
            wr = rt.wait(g) if g["waitreason"] else ""
            if g["magic"] != rt.magic:
                st += "(bad magic)"
            mcol, where = "", ""
            if g["m"]:
                try:
                    m = rt.read_m(g["m"])
                    mcol = "M%d/%d" % (m["id"], m["tid"])
                    t = thread_for_tid(m["tid"])
                    where = frame0_of(t) if t is not None else "(no gdb thread)"
                    if g["pinned_wait"]:
                        where += " [pinned wait]"
                except gdb.MemoryError:
                    mcol = "?"
            else:
                try:
                    where = where_parked(rt, g)
                except gdb.error as e:
                    where = "? (%s)" % e
            if g["is_main"] and not g["fn"]:
                start = "main"
            elif g["fn"]:
                start = fmt_sym(g["fn"])
                start = start.split(" (", 1)[0]
            else:
                start = "?"
            rows.append(("%d" % g["goid"], name, st, wr, mcol, start, where))
        hdr = ("GOID", "NAME", "STATUS", "WAIT", "M/TID", "START", "WHERE")
        widths = [max([len(hdr[i])] + [len(r[i]) for r in rows]) for i in range(6)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(hdr[:6], widths)) + "  " + hdr[6]]
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:6], widths)) + "  " + r[6])
        gdb.write("\n".join(lines) + "\n")
        counts = {}
        for r in rows:
            k = r[2] + (" (%s)" % r[3] if r[3] else "")
            counts[k] = counts.get(k, 0) + 1
        summary = ", ".join("%d %s" % (v, k) for k, v in
                            sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        gdb.write("%d green thread(s)%s; %d ever made\n" % (len(rows), ": " + summary if summary
                                                            else "", len(rt.gs)))
        if not rt.active:
            gdb.write("bobbin is loaded but not active (BOBBIN_DISABLE, or its start-up "
                      "check failed): the threads are native, see `info threads`\n")


# ---- gthread N CMD -------------------------------------------------------------

class _GUnwinder(Unwinder):
    """while ctx is set: the selected thread's frame 0 'returns' into the G's
    saved context, so the frames after #0 are the G's stack (core files)"""

    def __init__(self):
        super().__init__("bobbin-gthread")
        self.ctx = None

    def __call__(self, pending):
        if self.ctx is None:
            return None
        try:
            if pending.level() != 0:
                return None
        except AttributeError:
            return None
        sp = pending.read_register("rsp")
        pc = pending.read_register("rip")

        class FrameId:
            def __init__(self, sp, pc):
                self.sp, self.pc = sp, pc

        # frame 0's id must be "inner" (lower) than the G's first frame, or gdb
        # stops the backtrace with "previous frame inner to this frame"
        fid = FrameId(gdb.Value(self.ctx["rsp"] - 256).cast(sp.type), pc)
        ui = pending.create_unwind_info(fid)
        for r in CTX_REGS:
            t = pending.read_register(r).type
            ui.add_saved_register(r, gdb.Value(self.ctx[r]).cast(t))
        return ui


class _AsyncPreemptUnwinder(Unwinder):
    """the caller of bb_asyncpreempt is the interrupted code: its registers are
    on the stack at bb_asyncpreempt's rbx"""

    def __init__(self):
        super().__init__("bobbin-asyncpreempt")

    def __call__(self, pending):
        try:
            pc = int(pending.read_register("rip"))
            if not in_asyncpreempt(pc):
                return None
            rbx = int(pending.read_register("rbx")) & _MASK
            raw = bytes(gdb.selected_inferior().read_memory(rbx, 136))
        except (gdb.error, gdb.MemoryError):
            return None
        vals = struct.unpack("<17Q", raw)
        cfa = rbx + 136 + 128

        class FrameId:
            def __init__(self, sp, pc):
                self.sp, self.pc = sp, pc

        sp_t = pending.read_register("rsp").type
        ip_t = pending.read_register("rip").type
        start = asyncpreempt_range()[0]
        ui = pending.create_unwind_info(FrameId(gdb.Value(cfa).cast(sp_t),
                                                gdb.Value(start).cast(ip_t)))
        for i, r in enumerate(_AP_SLOTS):
            ui.add_saved_register(r, gdb.Value(vals[i]).cast(pending.read_register(r).type))
        ui.add_saved_register("rip", gdb.Value(vals[16]).cast(ip_t))
        ui.add_saved_register("rsp", gdb.Value(cfa).cast(sp_t))
        return ui


_unwinder = None
if register_unwinder is not None:
    _unwinder = _GUnwinder()
    register_unwinder(None, _unwinder, replace=True)
    register_unwinder(None, _AsyncPreemptUnwinder(), replace=True)
try:
    gdb.events.new_objfile.connect(_ap_reset)
    gdb.events.clear_objfiles.connect(_ap_reset)
except AttributeError:
    pass


def _run_on_thread(thread, cmd):
    old = gdb.selected_thread()
    try:
        thread.switch()
        gdb.newest_frame().select()
        gdb.execute(cmd, from_tty=False)
    finally:
        if old is not None and old.is_valid():
            old.switch()


def _run_with_regs(ctx, cmd):
    """run cmd on the selected thread with its registers set to ctx; restore"""
    gdb.newest_frame().select()
    names = list(CTX_REGS)
    saved = {}
    f = gdb.newest_frame()
    for r in names + ["orig_rax"]:
        try:
            saved[r] = int(f.read_register(r)) & _MASK
        except (gdb.error, ValueError):
            pass
    written = []
    try:
        for r in names:
            gdb.execute("set $%s = %#x" % (r, ctx[r] & _MASK), to_string=True)
            written.append(r)
        gdb.execute(cmd, from_tty=False)
    finally:
        for r in written + (["orig_rax"] if written and "orig_rax" in saved else []):
            try:
                gdb.execute("set $%s = %#x" % (r, saved[r] & _MASK), to_string=True)
            except gdb.error as e:
                gdb.write("bobbin: could not restore $%s: %s\n" % (r, e), gdb.STDERR)
        gdb.invalidate_cached_frames()
    return True


_MASK = 0xFFFFFFFFFFFFFFFF


def _bt_with_unwinder(ctx, btargs):
    """backtrace of the G through the unwinder, frame #0 (the M's) dropped"""
    if _unwinder is None:
        raise gdb.error("this gdb has no Python unwinders")
    gdb.newest_frame().select()
    _unwinder.ctx = ctx
    gdb.invalidate_cached_frames()
    try:
        words = (btargs or "").split()
        for i, w in enumerate(words):  # `bt 5`: one more frame, since #0 is dropped
            if w.isdigit() and int(w) > 0:
                words[i] = str(int(w) + 1)
                break
        out = gdb.execute("bt " + " ".join(words), to_string=True)
    finally:
        _unwinder.ctx = None
        gdb.invalidate_cached_frames()
    lines, dropping = [], False
    for line in out.splitlines():
        m = re.match(r"#(\d+)(\s+)(.*)", line)
        if m:
            k = int(m.group(1))
            dropping = k == 0
            if dropping:
                continue
            line = "#%d%s%s" % (k - 1, m.group(2) + (" " if len(str(k - 1)) < len(str(k)) else ""), m.group(3))
        elif dropping:
            continue  # bt full's locals of frame #0
        lines.append(line)
    if not lines or not lines[0].startswith("#0"):
        raise gdb.error("the unwinder did not reach the G's frames")
    gdb.write("\n".join(lines) + "\n")


def _bt_fp(rt, g):
    gdb.write("(frame-pointer walk from g->ctx: frames without a frame pointer may be missing)\n")
    for k, (pc, ret) in enumerate(fp_walk(rt, g)):
        func, off, where, lib = symbolize(pc, ret)
        s = "%s+%#x" % (func, off) if func else "??"
        gdb.write("#%-2d %#018x in %s%s%s\n" % (k, pc, s, " at " + where if where else "",
                                                " (%s)" % lib if lib and not where else ""))


def gthread_run(rt, g, cmd):
    if g["m"]:
        m = rt.read_m(g["m"])
        t = thread_for_tid(m["tid"])
        if t is None:
            raise gdb.GdbError("G %d is on M%d (tid %d), but gdb has no thread with that LWP"
                               % (g["goid"], m["id"], m["tid"]))
        _run_on_thread(t, cmd)
        return
    words = cmd.split(None, 1)
    is_bt = words and words[0] in ("bt", "backtrace", "where")
    if gdb.selected_thread() is None:
        raise gdb.GdbError("no thread selected")
    try:
        _run_with_regs(g["ctx"], cmd)
        return
    except gdb.error as e:
        msg = str(e)
        if not is_bt:
            raise gdb.GdbError("cannot set registers here (%s): only `gthread N bt` works "
                               "for a parked G in a core file" % msg)
    btargs = words[1] if len(words) > 1 else ""
    try:
        _bt_with_unwinder(g["ctx"], btargs)
        return
    except gdb.error as e:
        gdb.write("bobbin: unwinder fallback failed (%s)\n" % e, gdb.STDERR)
    _bt_fp(rt, g)


class Gthread(gdb.Command):
    """Run a command in the context of a bobbin green thread (G).

Usage: gthread N [CMD]     (CMD defaults to bt)
       gthread all [CMD]   every G that is not dead

N is the G's id as `info gthreads` shows it. A G running on an M: CMD runs on
that OS thread. A parked G: CMD runs with the selected thread's registers set to
the G's saved ones (restored afterwards); in a core file, where registers cannot
be written, only backtraces work (through a Python unwinder, or a frame-pointer
walk)."""

    def __init__(self):
        super().__init__("gthread", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        args = arg.split(None, 1)
        if not args:
            raise gdb.GdbError("usage: gthread N|all [CMD]  (CMD defaults to bt)")
        cmd = args[1] if len(args) > 1 else "bt"
        try:
            rt = Runtime()
        except BobbinError as e:
            raise gdb.GdbError(str(e))
        if args[0] == "all":
            for g in rt.live_gs():
                name = g["name"] or ("main" if g["is_main"] else "")
                wr = rt.wait(g) if g["waitreason"] else ""
                gdb.write("\ngthread %d%s [%s%s]:\n" % (g["goid"], ' "%s"' % name if name else "",
                                                      rt.status(g), ", " + wr if wr else ""))
                try:
                    gthread_run(rt, g, cmd)
                except (gdb.error, gdb.GdbError) as e:
                    gdb.write("  %s\n" % e)
            return
        try:
            goid = int(args[0], 0)
        except ValueError:
            raise gdb.GdbError("gthread: '%s' is not a G id (see `info gthreads`)" % args[0])
        g = rt.find(goid)
        if g is None:
            raise gdb.GdbError("no live G with id %d (see `info gthreads`)" % goid)
        gthread_run(rt, g, cmd)


InfoGthreads()
Gthread()
