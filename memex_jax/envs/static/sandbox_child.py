"""First process inside the sandbox: applies the limits, drops privileges, then execs the code.

Run by `sandbox.run_python` as `python -I sandbox_child.py CONFIG_JSON`, already inside the fresh
network / pid namespaces when those are available. It imports only the standard library, sets the
resource limits while it may still raise them, switches to the unprivileged uid/gid (when started
as root; the kernel ignores RLIMIT_NPROC for root), and replaces itself with the interpreter that
runs the untrusted script, so no privileged process stays behind in the sandbox.

CONFIG_JSON keys: interpreter, script, cpu_time_s, memory_bytes, max_processes, max_file_bytes,
uid (int or null), gid (int or null), env (dict).
"""

import json
import os
import resource
import sys


def main() -> None:
  config = json.loads(sys.argv[1])
  limits = {
      resource.RLIMIT_CPU: config["cpu_time_s"],
      resource.RLIMIT_AS: config["memory_bytes"],
      resource.RLIMIT_NPROC: config["max_processes"],
      resource.RLIMIT_FSIZE: config["max_file_bytes"],
      resource.RLIMIT_CORE: 0,
  }
  for kind, value in limits.items():
    resource.setrlimit(kind, (value, value))
  if config["uid"] is not None:
    os.setgroups([])
    os.setgid(config["gid"])
    os.setuid(config["uid"])
    if os.getuid() == 0 or os.geteuid() == 0:
      raise SystemExit("sandbox: could not drop root privileges")
  interpreter = config["interpreter"]
  os.execve(interpreter, [interpreter, "-I", "-B", config["script"]], config["env"])


if __name__ == "__main__":
  main()
