"""Run one command and record its own peak memory: ``measured_spawn.py RSS_FILE AS_LIMIT ARGV...``.

Linux carries the parent's high-water RSS into a child at fork and keeps it across exec, so a child forked
straight from a large pytest worker reports the worker's peak, not its own. This small interpreter has a fresh
memory map after its exec, so the command it forks reports what the command itself used. It sets the
address-space limit before the fork (the command inherits it), writes the command's ``ru_maxrss`` in bytes to
RSS_FILE, and exits as the command did (the same code, or the same signal).
"""

import contextlib
import os
import resource
import signal
import subprocess
import sys


def main() -> None:
    rss_file, limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    child = subprocess.Popen(argv)
    _, status, usage = os.wait4(child.pid, 0)  # retried on EINTR by Python itself (PEP 475)
    with open(rss_file, "w", encoding="ascii") as out:
        out.write(str(usage.ru_maxrss * 1024))
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP cannot be handled
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
