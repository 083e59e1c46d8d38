# memsnap.gdb: jemalloc's heap profiler from gdb, for when memsnap itself
# cannot be used.  Plain gdb command language: no Python, no debug
# symbols, no global variable of the target.
#
#   gdb -p PID -batch -nx -x /usr/share/memsnap/memsnap.gdb -ex memsnap-status
#   gdb -p PID -batch -nx -x memsnap.gdb -ex memsnap-on
#   gdb -p PID -batch -nx -x memsnap.gdb -ex 'memsnap-dump /tmp/app.heap'
#   gdb -p PID -batch -nx -x memsnap.gdb -ex memsnap-off
#
# Commands (each is one or a few calls of jemalloc's mallctl):
#
#   memsnap-status          version, config.prof, opt.prof, prof.active,
#                           prof.gdump, prof.lg_sample, opt.prof_prefix and
#                           stats.allocated|active|resident|mapped
#   memsnap-on              prof.active = true (start sampling)
#   memsnap-off             prof.active = false (stop sampling)
#   memsnap-reset [LG]      prof.reset: forget the samples so far
#                           (sample every 2^LG bytes from now on)
#   memsnap-dump [PATH]     prof.dump, to PATH or, without one, to
#                           <opt.prof_prefix>.<pid>.<seq>.m<mseq>.heap
#
# PATH is opened BY THE TARGET: with its uid, relative to its cwd, inside
# its mount namespace (a container's /tmp is not the host's).  It may not
# contain spaces or quotes.  Read the dump with `memsnap report PATH`.
#
# jemalloc's mallctl is found by that name.  For a prefixed build set the
# function first, e.g. for Redis' bundled jemalloc:
#
#   gdb -p PID -batch -nx -ex 'set $memsnap_mallctl = &je_mallctl' \
#       -x memsnap.gdb -ex memsnap-status
#
# The target must have been started with profiling on
# (MALLOC_CONF=prof:true,prof_active:false; _RJEM_MALLOC_CONF for Rust's
# tikv-jemallocator): otherwise every prof.* call fails with ENOENT, and
# the commands say so.
#
# HAZARDS -- why memsnap exists, and what this file can and cannot avoid:
#
# - gdb stops ALL threads of the process, for the whole session: attach,
#   loading every object's symbols, the call, detach.  Hundreds of
#   milliseconds on a small process, seconds on a big one.  During the
#   call itself gdb lets the other threads run again.
# - A string literal in a gdb expression that reaches the target (such as
#   `call mallctl("prof.dump", 0, 0, 0, 0)`) makes gdb call malloc IN THE
#   TARGET to hold the string, and never free it.  If the thread gdb
#   borrows, or a thread gdb stopped, holds the allocator's lock, that
#   malloc deadlocks the process.  This file never does that: names and
#   values are written by gdb itself, byte by byte, into the borrowed
#   thread's stack 64 KiB below its stack pointer (dead memory, far below
#   gdb's own call frame), and only pointers to them are passed.  The
#   registers, $sp included, are never changed by this file.  A thread
#   with less than 64 KiB of stack left makes the write fail before any
#   call ("Cannot access memory"): select another thread (`thread N`,
#   before the command).
# - gdb calls on the thread it has selected (normally the main thread)
#   without looking at where that thread stopped.  If it was inside
#   malloc or free, mallctl may deadlock on the lock it holds, or see the
#   allocator half-updated.
# - If gdb dies or is killed while the call runs, the thread is left
#   inside gdb's call frame and the target crashes.  A signal inside the
#   callee is unwound (unwindonsignal is set on below) and reported.
# - The borrowed thread's interrupted system call is restarted by gdb's
#   own logic; its errno may change.
#
# memsnap does the same work with ONE thread stopped for well under a
# millisecond, checks that thread first, and restores it even if memsnap
# is killed: prefer `memsnap --pid PID dump` whenever it can run.

set unwindonsignal on
set confirm off
set pagination off

# ---- internals ---------------------------------------------------------

# The function, and the scratch area: 4 KiB at 64 KiB below $sp.
#   +0 size_t oldlen   +8 old value   +16 new value   +24 pointer for
#   prof.dump          +32 the name (63 bytes)   +96 a path (4000 bytes)
define memsnap--prepare
  if $_isvoid($memsnap_mallctl)
    set $memsnap_mallctl = &mallctl
  end
  set $memsnap_buf = (char *) (((unsigned long) $sp - 65536) & ~15UL)
  # Touch the whole area first: a missing page fails here, not mid-way.
  set *(unsigned long *) $memsnap_buf = 0
  set *(unsigned long *) ($memsnap_buf + 4088) = 0
end

# Copy the gdb-side string $memsnap_str (with its NUL) to $memsnap_buf +
# $arg0.  The caller checks its length.
define memsnap--put
  set $memsnap_i = 0
  while $memsnap_i < sizeof($memsnap_str)
    set *(char *) ($memsnap_buf + $arg0 + $memsnap_i) = $memsnap_str[$memsnap_i]
    set $memsnap_i = $memsnap_i + 1
  end
end

# mallctl(NAME, oldp, oldlenp, newp, newlen) with the name $arg0 and the
# pointers in $memsnap_oldp, $memsnap_oldlenp, $memsnap_newp,
# $memsnap_newlen; the result in $memsnap_rc.
define memsnap--ctl
  set $memsnap_str = "$arg0"
  memsnap--put 32
  set $memsnap_rc = ((int (*)(const char *, void *, unsigned long *, void *, unsigned long)) $memsnap_mallctl)($memsnap_buf + 32, $memsnap_oldp, $memsnap_oldlenp, $memsnap_newp, $memsnap_newlen)
end

# Read $arg0 of size $arg1 into $memsnap_buf + 8.
define memsnap--read
  set *(unsigned long *) $memsnap_buf = $arg1
  set *(unsigned long *) ($memsnap_buf + 8) = 0
  set $memsnap_oldp = $memsnap_buf + 8
  set $memsnap_oldlenp = (unsigned long *) $memsnap_buf
  set $memsnap_newp = 0
  set $memsnap_newlen = 0
  memsnap--ctl $arg0
end

# Write the $arg1-byte value at $memsnap_buf + 16 to $arg0.
define memsnap--write
  set $memsnap_oldp = 0
  set $memsnap_oldlenp = 0
  set $memsnap_newp = $memsnap_buf + 16
  set $memsnap_newlen = $arg1
  memsnap--ctl $arg0
end

# The errno of a failed call, by name and with what it means here.
define memsnap--why
  if $memsnap_rc == 2
    echo ENOENT (no such name, or profiling is off: start the process with MALLOC_CONF=prof:true,prof_active:false)
  else
    if $memsnap_rc == 14
      echo EFAULT (the target could not write the file: its uid, cwd and mount namespace apply)
    else
      if $memsnap_rc == 1
        echo EPERM (read-only or write-only name)
      else
        if $memsnap_rc == 22
          echo EINVAL (size mismatch)
        else
          if $memsnap_rc == 11
            echo EAGAIN (try again)
          else
            if $memsnap_rc == 36
              echo ENAMETOOLONG (a path of at most 3999 bytes)
            else
              printf "errno %d", $memsnap_rc
            end
          end
        end
      end
    end
  end
end

# "NAME  true|false", or why not, for the bool $arg0.
define memsnap--show-bool
  memsnap--read $arg0 1
  printf "%-18s ", $memsnap_str
  if $memsnap_rc != 0
    printf "unavailable: "
    memsnap--why
    echo \n
  else
    if *(unsigned char *) ($memsnap_buf + 8)
      echo true\n
    else
      echo false\n
    end
  end
end

# "NAME  N" for the size_t, unsigned or uint64 $arg0.
define memsnap--show-size
  memsnap--read $arg0 8
  printf "%-18s ", $memsnap_str
  if $memsnap_rc != 0
    printf "unavailable: "
    memsnap--why
    echo \n
  else
    printf "%lu\n", *(unsigned long *) ($memsnap_buf + 8)
  end
end

# "NAME  text" for the const char * $arg0.
define memsnap--show-string
  memsnap--read $arg0 8
  printf "%-18s ", $memsnap_str
  if $memsnap_rc != 0
    printf "unavailable: "
    memsnap--why
    echo \n
  else
    if *(char **) ($memsnap_buf + 8) == 0
      echo (none)\n
    else
      printf "%s\n", *(char **) ($memsnap_buf + 8)
    end
  end
end

# prof.active = $arg0 (1 or 0), with the old value read back.
define memsnap--set-active
  memsnap--prepare
  set *(unsigned char *) ($memsnap_buf + 16) = $arg0
  set *(unsigned long *) $memsnap_buf = 1
  set *(unsigned char *) ($memsnap_buf + 8) = 0
  set $memsnap_oldp = $memsnap_buf + 8
  set $memsnap_oldlenp = (unsigned long *) $memsnap_buf
  set $memsnap_newp = $memsnap_buf + 16
  set $memsnap_newlen = 1
  memsnap--ctl prof.active
  if $memsnap_rc != 0
    printf "memsnap: prof.active: "
    memsnap--why
    echo \n
  else
    printf "prof.active        %d (was %d)\n", $arg0, *(unsigned char *) ($memsnap_buf + 8)
  end
end

# ---- commands ----------------------------------------------------------

define memsnap-status
  memsnap--prepare
  memsnap--show-string version
  memsnap--show-bool config.prof
  memsnap--show-bool opt.prof
  if $memsnap_rc == 0 && *(unsigned char *) ($memsnap_buf + 8) == 0
    echo (profiling is off until a restart with MALLOC_CONF=prof:true,prof_active:false)\n
  end
  memsnap--show-bool prof.active
  memsnap--show-bool prof.gdump
  memsnap--show-size prof.lg_sample
  memsnap--show-string opt.prof_prefix
  # stats.* are refreshed by writing epoch
  set *(unsigned long *) ($memsnap_buf + 16) = 1
  memsnap--write epoch 8
  memsnap--show-size stats.allocated
  memsnap--show-size stats.active
  memsnap--show-size stats.resident
  memsnap--show-size stats.mapped
end
document memsnap-status
Print jemalloc's version, profiling state and heap statistics (mallctl).
end

define memsnap-on
  memsnap--set-active 1
end
document memsnap-on
Start heap profile sampling: prof.active = true.
Needs a target started with MALLOC_CONF=prof:true.
end

define memsnap-off
  memsnap--set-active 0
end
document memsnap-off
Stop heap profile sampling: prof.active = false.
end

define memsnap-reset
  memsnap--prepare
  if $argc == 0
    set $memsnap_newp = 0
    set $memsnap_newlen = 0
  else
    set *(unsigned long *) ($memsnap_buf + 16) = $arg0
    set $memsnap_newp = $memsnap_buf + 16
    set $memsnap_newlen = 8
  end
  set $memsnap_oldp = 0
  set $memsnap_oldlenp = 0
  memsnap--ctl prof.reset
  if $memsnap_rc != 0
    printf "memsnap: prof.reset: "
    memsnap--why
    echo \n
  else
    memsnap--show-size prof.lg_sample
  end
end
document memsnap-reset
Forget the heap profile samples so far: prof.reset.
memsnap-reset LG also sets the sampling interval to 2^LG bytes.
end

define memsnap-dump
  memsnap--prepare
  set $memsnap_newp = 0
  set $memsnap_newlen = 0
  set $memsnap_rc = 0
  if $argc == 1
    set $memsnap_path = "$arg0"
    if sizeof($memsnap_path) > 4000
      set $memsnap_rc = 36
    else
      set $memsnap_str = $memsnap_path
      memsnap--put 96
      set *(char **) ($memsnap_buf + 24) = $memsnap_buf + 96
      set $memsnap_newp = $memsnap_buf + 24
      set $memsnap_newlen = 8
    end
  end
  set $memsnap_oldp = 0
  set $memsnap_oldlenp = 0
  if $memsnap_rc == 0
    memsnap--ctl prof.dump
  end
  if $memsnap_rc != 0
    printf "memsnap: prof.dump: "
    memsnap--why
    echo \n
  else
    if $argc == 0
      memsnap--read opt.prof_prefix 8
      if $memsnap_rc == 0
        printf "dumped to %s.<pid>.<seq>.m<mseq>.heap in the target's cwd\n", *(char **) ($memsnap_buf + 8)
      else
        echo dumped into the target's cwd\n
      end
    else
      printf "dumped to %s\n", $memsnap_path
    end
  end
end
document memsnap-dump
Write a heap profile: prof.dump.
memsnap-dump PATH writes PATH (opened by the target: its uid, cwd and mount
namespace); without PATH jemalloc names the file after opt.prof_prefix.
Read it with `memsnap report PATH`.
end
